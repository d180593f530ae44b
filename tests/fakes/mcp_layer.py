"""The MCP server proper, on the SDK's low-level ``Server``, plus its fault middleware.

The low-level server (not ``MCPServer``) is used on purpose: the fake must list the real server's
tool schemas byte for byte and page ``tools/list`` with ``nextCursor``, and ``MCPServer`` derives
schemas from Python signatures and never pages. Everything else is the SDK's own behaviour:
handshake and version negotiation, sessions, SSE or JSON replies, priming events, resumability,
and the request-scoped back-channel used for notifications and server-to-client requests.

What the SDK lets us do natively, and where it is done:

* JSON-RPC errors, ``isError`` results, a hanging call, and the resumable stream drop (the SDK's
  ``close_sse_stream``) are applied by :class:`FaultMiddleware`, a ``ServerMiddleware`` that sees
  every request, ``initialize`` included;
* ``protocol_version`` and ``no_tools_capability`` rewrite the ``initialize`` result there too;
* delay, progress, logging, ``tools/list_changed`` and server-to-client requests happen inside
  the tool call (:meth:`FakeMcp.call_tool`), on the call's own SSE stream.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    CallToolRequestParams,
    ListPromptsResult,
    ListResourcesResult,
    LoggingMessageNotification,
    PaginatedRequestParams,
    ProgressNotification,
    ToolListChangedNotification,
)
from pydantic import BaseModel, ConfigDict, ValidationError

from tests.fakes.http_layer import EXCHANGE_KEY, Exchange
from tests.fakes.profiles import Profile, failed
from tests.fakes.state import FakeState

logger = logging.getLogger("fake_docling.mcp")

#: Parameters that make a server-to-client request well formed for the methods tests use.
_SERVER_REQUEST_PARAMS: dict[str, dict[str, Any]] = {
    "sampling/createMessage": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}],
        "maxTokens": 16,
    },
    "elicitation/create": {
        "message": "Which one?",
        "requestedSchema": {"type": "object", "properties": {}},
    },
}


#: What 2026-07-28 requires of a list result (the SDK drops these keys for older revisions).
_LIST_RESULT: dict[str, Any] = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

#: How long a drop waits for the priming event to reach the client before cutting anyway.
_PRIMING_WAIT_S = 30.0


class _RawServerRequest(BaseModel):
    """Any server-to-client request; ``ServerSession.send_request`` only dumps it."""

    method: str
    params: dict[str, Any] | None = None


class _AnyResult(BaseModel):
    model_config = ConfigDict(extra="allow")


def exchange_of(ctx: ServerRequestContext[Any, Any]) -> Exchange | None:
    scope = getattr(ctx.request, "scope", None)
    return scope.get(EXCHANGE_KEY) if isinstance(scope, dict) else None


class FaultMiddleware:
    """Applies the MCP-level faults the HTTP layer chose, and shapes ``initialize``."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        exchange = exchange_of(ctx)
        fault = exchange.fault if exchange is not None and ctx.request_id is not None else None
        if fault is None:
            result = await call_next(ctx)
        else:
            assert exchange is not None
            result = await self._inject(fault, ctx, exchange, call_next)
        if ctx.method == "initialize" and isinstance(result, dict):
            result = self._shape_initialize(result)
        return result

    async def _inject(
        self,
        fault: str,
        ctx: ServerRequestContext[Any, Any],
        exchange: Exchange,
        call_next: CallNext,
    ) -> HandlerResult:
        knobs = self.state.knobs
        if fault.startswith("jsonrpc:"):
            code = int(fault.split(":", 1)[1])
            raise MCPError(
                code=code, message=knobs.fail_message or f"injected JSON-RPC error {code}"
            )
        if fault == "is_error":
            return failed(knobs.fail_message or f"Error executing tool {exchange.tool}")
        if fault == "bad_output":
            # The tool runs, then its structuredContent breaks the tool's outputSchema: every
            # value becomes a list, which no declared property type of these tools accepts.
            result = await call_next(ctx)
            if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
                broken = {key: [] for key in result["structuredContent"]}
                return {**result, "structuredContent": broken}
            raise MCPError(code=-32603, message="bad_output needs a tool with structured output")
        if fault == "hang":
            # Counted before the wait, with no await between: once a test sees the count, a
            # reset releases this call (a reset before it would leave it hanging).
            self.state.stats.hanging_calls += 1
            await self.state.hang_release.wait()
            raise MCPError(code=-32603, message="hanging call released by the fake's control API")
        if fault == "drop_stream":
            await self._drop_stream(ctx, exchange)
            return await call_next(ctx)
        raise MCPError(code=-32603, message=f"fault {fault} is not an MCP-level fault")

    async def _drop_stream(self, ctx: ServerRequestContext[Any, Any], exchange: Exchange) -> None:
        """Close the call's SSE stream before its response.

        With an event store and a 2025-11-25 client the SDK offers ``close_sse_stream``: we wait
        until the priming event (with its id, and ``retry`` when configured) is on the wire, then
        close; the response is stored and replayed to ``GET`` + ``Last-Event-ID``. Otherwise the
        stream cannot be resumed and the HTTP layer ends it before any event.
        """
        stats = self.state.stats
        if ctx.close_sse_stream is not None:
            with anyio.move_on_after(_PRIMING_WAIT_S):
                await exchange.event_with_id_sent.wait()
        if ctx.close_sse_stream is not None and exchange.event_with_id_sent.is_set():
            await ctx.close_sse_stream()
        else:
            exchange.truncate_requested = True
        stats.streams_dropped += 1
        stats.last_drop_at = time.monotonic()

    def _shape_initialize(self, result: dict[str, Any]) -> dict[str, Any]:
        knobs = self.state.knobs
        result = dict(result)
        capabilities = dict(result.get("capabilities") or {})
        if knobs.no_tools_capability:
            capabilities.pop("tools", None)
        elif knobs.emit_list_changed:
            capabilities["tools"] = {**capabilities.get("tools", {}), "listChanged": True}
        result["capabilities"] = capabilities
        if knobs.protocol_version is not None:
            result["protocolVersion"] = knobs.protocol_version
        return result


class FakeMcp:
    """Handlers of the fake's low-level server."""

    def __init__(self, state: FakeState, profile: Profile, server_name: str) -> None:
        self.state = state
        self.profile = profile
        self.server: Server[Any] = Server(
            server_name,
            version="",
            on_list_prompts=self.list_prompts,
            on_list_resources=self.list_resources,
        )
        # Registered as raw handlers: they return wire dicts, so the listing stays verbatim.
        self.server.add_request_handler("tools/list", PaginatedRequestParams, self.list_tools)
        self.server.add_request_handler("tools/call", CallToolRequestParams, self.call_tool)
        self.server.middleware.append(FaultMiddleware(state))

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return ListPromptsResult(prompts=[])

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[])

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> dict[str, Any]:
        tools = self.profile.tools
        size = self.state.knobs.tools_page_size
        if size is None:
            return {**_LIST_RESULT, "tools": tools}  # the SDK drops these for older revisions
        cursor = params.cursor
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise MCPError(code=INVALID_PARAMS, message=f"Invalid cursor: {cursor}") from None
        if not 0 <= start <= len(tools):
            raise MCPError(code=INVALID_PARAMS, message=f"Invalid cursor: {cursor}")
        page: dict[str, Any] = {**_LIST_RESULT, "tools": tools[start : start + size]}
        if start + size < len(tools):
            page["nextCursor"] = str(start + size)
        return page

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> dict[str, Any]:
        stats = self.state.stats
        stats.tool_calls_in_flight += 1
        stats.max_tool_calls_in_flight = max(
            stats.max_tool_calls_in_flight, stats.tool_calls_in_flight
        )
        try:
            if self.state.knobs.announce_call_start:  # held by the server: before any slot
                await self._log(ctx, {"event": "call started", "tool": params.name})
            slots = self.state.call_slots()
            if slots is None:
                return await self._work(ctx, params)
            async with slots:
                return await self._work(ctx, params)
        finally:
            stats.tool_calls_in_flight -= 1

    async def _work(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> dict[str, Any]:
        """One tool call's own time and result (inside its slot, when slots are limited)."""
        stats = self.state.stats
        stats.tool_calls_working += 1
        stats.max_tool_calls_working = max(stats.max_tool_calls_working, stats.tool_calls_working)
        try:
            delay = self.state.knobs.delays(params.name)
            if delay:
                await anyio.sleep(delay)
            self._maybe_evict(params.name)
            await self._before_result(ctx)
            result = await self.profile.call(params.name, params.arguments or {})
            return {"resultType": "complete", **result}  # dropped by the SDK for 2025 revisions
        finally:
            stats.tool_calls_working -= 1

    def _maybe_evict(self, tool: str) -> None:
        """The ``evict_next`` knob: the cache is emptied before this call looks into it."""
        knobs = self.state.knobs
        if knobs.evict_next and tool in knobs.evict_tools:
            self.state.knobs = knobs.updated({"evict_next": knobs.evict_next - 1})
            self.state.cache.evictions += self.state.cache.clear()

    async def _before_result(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """The messages a knob asks for, sent on this call's stream before its result."""
        knobs, stats = self.state.knobs, self.state.stats
        related = ctx.request_id
        meta = (ctx.params or {}).get("_meta") or {}
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
            stats.tool_call_traceparents.append(meta["traceparent"])
        if knobs.emit_progress and token is not None:
            for step in (1, 2, 3):
                notification = ProgressNotification.model_validate(
                    {
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step, "total": 3,
                                   "message": f"step {step} of 3"},
                    }
                )  # fmt: skip
                await ctx.session.send_notification(notification, related_request_id=related)
                stats.progress_sent += 1
        if knobs.emit_logging:
            await self._log(ctx, {"event": "tool call", "request_id": related})
        if knobs.emit_list_changed:
            changed = ToolListChangedNotification.model_validate(
                {"method": "notifications/tools/list_changed"}
            )
            await ctx.session.send_notification(changed, related_request_id=related)
            stats.list_changed_sent += 1
        if knobs.server_ping:
            await self._ask_client(ctx, "ping")
        if knobs.server_request_method:
            await self._ask_client(ctx, knobs.server_request_method)

    async def _log(self, ctx: ServerRequestContext[Any, Any], data: dict[str, Any]) -> None:
        """A ``notifications/message`` on this call's stream."""
        log = LoggingMessageNotification.model_validate(
            {
                "method": "notifications/message",
                "params": {"level": "info", "logger": "fake-docling", "data": data},
            }
        )
        await ctx.session.send_notification(log, related_request_id=ctx.request_id)
        self.state.stats.log_messages_sent += 1

    async def _ask_client(self, ctx: ServerRequestContext[Any, Any], method: str) -> None:
        """Send a request to the client on this call's stream and record how it answered."""
        answer: dict[str, Any] = {"method": method}
        request = _RawServerRequest(method=method, params=_SERVER_REQUEST_PARAMS.get(method))
        try:
            result = await ctx.session.send_request(
                request,  # type: ignore[arg-type]
                _AnyResult,
                request_read_timeout_seconds=self.state.knobs.server_request_timeout_s,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
            answer |= {"outcome": "result", "result": result.model_dump()}
        except NoBackChannelError:
            answer["outcome"] = "no_back_channel"
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                answer["outcome"] = "timeout"
            else:
                answer |= {"outcome": "error", "error": {"code": exc.code, "message": exc.message}}
        except ValidationError as exc:
            answer |= {"outcome": "invalid_result", "detail": str(exc)}
        self.state.stats.server_request_answers.append(answer)
