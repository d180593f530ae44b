"""The friendly MCP client: lifecycle, tool registry, size-aware calls, batches, ping, close.

Layers, as in the MCP SDK's client: a transport behind a tiny protocol, a JSON-RPC session
above it, and this class on top, which is all callers see. Tool errors are results
(``ToolResult.is_error``), never exceptions; everything else that goes wrong is a catalog error.

The client never initializes on its own accord: the caller calls :meth:`initialize` (a tool
call before that is E301). With ``MCP_PROTOCOL_VERSION=auto`` (the default) it first probes
``server/discover``: a server that offers the stateless 2026-07-28 revision is used without a
session (every request stamped, :mod:`._revision`); any other answer but a transport failure
falls back to the 2025-11-25 ``initialize`` handshake, which negotiates down as the server
answers. A pinned version is honoured as it is.

In session mode the client *re*-initializes by itself: when the server answers HTTP 404 to a
session it had given us (it restarted, or expired the session), it runs the handshake again,
once, and resends the request; only if that fails does the caller see E308. Stateless mode has
no session to lose. One client is meant to be shared by every thread of a worker process.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from errors import (
    CallTimeout,
    MissingCapability,
    NotInitialized,
    ParseError,
    ProtocolError,
    SessionExpired,
    UnexpectedError,
)
from errors import PipelineError as _PipelineError
from pipeline import __version__
from pipeline.mcp._auth import auth_from_settings
from pipeline.mcp._batch import CallOutcome, ToolCall, run_batch
from pipeline.mcp._http import StreamableHttpTransport
from pipeline.mcp._lifecycle import Lifecycle, LifecycleState, Transition, format_trail
from pipeline.mcp._protocol import (
    LATEST_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
    JsonObject,
    LogMessage,
    Progress,
    ServerInfo,
    Tool,
    ToolResult,
    tools_page,
)
from pipeline.mcp._registry import RegistryStats, ToolRegistry
from pipeline.mcp._revision import (
    AUTO,
    MODERN_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
    Discovery,
    HeaderDeclarations,
    header_declarations,
    invalid_header_declaration,
    param_headers,
)
from pipeline.mcp._session import JsonRpcSession, Listeners
from pipeline.mcp._stdio import StdioTransport
from pipeline.mcp._timeouts import CallTimeouts, Deadline
from pipeline.mcp._transport import Binding, Transport
from pipeline.mcp.settings import (
    McpSettings,
    is_stdio,
    load_mcp_settings,
    origin_of,
)
from pipeline.support.secrets import mask_address

logger = logging.getLogger("doclane.mcp.client")

_S = LifecycleState
#: A server that pages tools/list forever is broken; stop listening to it here.
_MAX_TOOL_PAGES = 1000
#: Answers one input request of a 2026-07-28 server: (method, params) -> its result.
InputHandler = Callable[[str, JsonObject], JsonObject]
#: Rounds of a multi-round-trip (input_required) result before giving up.
_MAX_INPUT_ROUNDS = 10


class McpClient:
    """A client of one MCP endpoint; see the module docstring and docs/architecture.md."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        settings: McpSettings | None = None,
        transport: Transport | None = None,
        timeouts: CallTimeouts | None = None,
        auth: httpx.Auth | None = None,
        protocol_version: str | None = None,
        registry_ttl: float | None = None,
        require_tools: bool = True,
        on_progress: Callable[[Progress], None] | None = None,
        on_log: Callable[[LogMessage], None] | None = None,
        on_notification: Callable[[str, JsonObject], None] | None = None,
        on_input_request: InputHandler | None = None,
    ) -> None:
        """``endpoint`` is used exactly as given (default: the settings' first endpoint).

        ``on_input_request(method, params) -> result`` answers what a 2026-07-28 server asks
        of the client in the middle of a call (elicitation, sampling, roots); without it such
        a call is E305, as doclane, a batch pipeline, has nobody to ask.

        ``require_tools=False`` accepts a server without the ``tools`` capability (the
        conformance suite's ``initialize`` scenario); doclane itself always needs tools.
        ``auth`` (default: from the settings) applies to the built-in HTTP transport; a
        ``transport`` passed in brings its own.
        """
        self.settings = settings if settings is not None else load_mcp_settings()
        if endpoint is None:
            endpoint = transport.endpoint if transport is not None else self.settings.endpoint
        self._endpoint = endpoint
        self._shown = mask_address(endpoint)
        self.timeouts = timeouts or CallTimeouts.from_settings(self.settings)
        self.protocol_version = protocol_version or self.settings.protocol_version
        self._require_tools = require_tools
        if transport is None and is_stdio(endpoint):  # the server as a child of this process
            transport = StdioTransport.from_endpoint(
                endpoint,
                max_reply_bytes=self.settings.max_reply_bytes,
                grace_s=self.settings.stdio_grace_s,
            )
        self._transport: Transport = transport or StreamableHttpTransport(
            endpoint,
            auth=auth if auth is not None else auth_from_settings(self.settings, endpoint),
            connect_timeout=self.timeouts.connect_s,
            default_retry_ms=self.settings.sse_retry_ms,
            resume_attempts=self.settings.resume_attempts,
            max_connections=self.settings.max_connections,
            max_reply_bytes=self.settings.max_reply_bytes,
        )
        self._listeners = Listeners(
            on_progress=on_progress,
            on_log=on_log,
            on_tools_changed=self._tools_changed,
            on_notification=on_notification,
        )
        self._session = JsonRpcSession(
            self._transport,
            listeners=self._listeners,
            courtesy_timeout=self.timeouts.request_s,
            client_info={"name": "doclane", "version": __version__},
        )
        self._lifecycle = Lifecycle()
        self._registry = ToolRegistry(
            registry_ttl if registry_ttl is not None else self.settings.registry_ttl_s
        )
        self._binding = Binding()
        self._server: ServerInfo | None = None
        self._handshake_lock = threading.Lock()
        self._progress_tokens = itertools.count(1)
        self._on_input_request = on_input_request
        self._declarations: dict[str, tuple[Tool, HeaderDeclarations]] = {}

    # --- what it is -----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self._endpoint

    @property
    def origin(self) -> str:
        """``scheme://host:port``: the key of this server's circuit breaker."""
        return origin_of(self._endpoint)

    @property
    def state(self) -> LifecycleState:
        return self._lifecycle.state

    @property
    def trail(self) -> list[Transition]:
        return self._lifecycle.trail

    def trail_text(self) -> str:
        return format_trail(self._lifecycle.trail)

    @property
    def server(self) -> ServerInfo | None:
        """What the server said in the last successful ``initialize``."""
        return self._server

    @property
    def session_id(self) -> str | None:
        return self._binding.session_id

    @property
    def negotiated_version(self) -> str | None:
        return self._binding.protocol_version

    def registry_stats(self) -> RegistryStats:
        return self._registry.stats()

    def __repr__(self) -> str:
        return f"McpClient({self._shown!r}, state={self.state.value})"

    # --- lifecycle ------------------------------------------------------------------------------

    def initialize(self) -> ServerInfo:
        """Handshake, capability check and tool listing; idempotent and thread-safe.

        Raises E305 (unsupported protocol version, no ``tools`` capability), E302/E303/E310
        (cannot reach the server, too slow, refused) and the E2xx a JSON-RPC error maps to.
        A failed initialize leaves the client ``new``, so it can be called again.
        """
        with self._handshake_lock:
            state = self._lifecycle.state
            if state is _S.READY and self._server is not None:
                return self._server
            if state is _S.CLOSED:
                raise NotInitialized("the client is closed")
            if state is _S.REINITIALIZING:
                self._reinitialize_locked(self._binding, "initialize() called")
            else:
                self._lifecycle.move(
                    _S.INITIALIZING,
                    f"initialize {self._shown}, asking for protocol {self.protocol_version}",
                )
                try:
                    self._handshake()
                except BaseException as exc:
                    self._lifecycle.move(_S.NEW, f"initialize failed: {_describe(exc)}")
                    raise
                self._lifecycle.move(_S.READY, self._ready_reason())
            assert self._server is not None
            return self._server

    def close(self) -> None:
        """End the session (``DELETE``) and release connections; idempotent, never raises."""
        with self._handshake_lock:
            if self._lifecycle.state is _S.CLOSED:
                return
            binding = self._binding
            self._lifecycle.move(_S.CLOSED, "close()")
        try:
            self._transport.delete(binding)
        except Exception:
            logger.warning("ending the session at %s failed", self._shown, exc_info=True)
        finally:
            self._transport.close()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- tools ----------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The server's tools, from the registry (refetched when stale)."""
        self._ready_binding()
        return self._registry.all(self._load_tools)

    def tool(self, name: str) -> Tool:
        """One tool's definition; E304 if the server offers none by that name."""
        self._ready_binding()
        return self._registry.get(name, self._load_tools)

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        size_bytes: int | None = None,
        timeout: float | None = None,
    ) -> ToolResult:
        """Call a tool; its timeout is ``timeout`` or the size tier of ``size_bytes``.

        Returns the result, ``is_error`` included (``errors.classify(result.raw, stage=...)``
        makes it E306/E307 where the caller wants). Raises E301 before ``initialize``, E304 for
        an unknown tool, E203 for arguments that break its schema (nothing is sent), E311 for
        output that breaks its ``outputSchema``, and the transport's E2xx/E302/E303/E308/E310.
        """
        return self._call(name, arguments or {}, size_bytes=size_bytes, timeout=timeout, cap=None)

    def call_tools(
        self,
        calls: Sequence[ToolCall],
        *,
        parallel: bool = False,
        timeout: float | None = None,
    ) -> list[CallOutcome]:
        """Run a batch; outcomes come back in request order, failures included, never raised."""
        return run_batch(
            lambda call, cap: self._call(
                call.name,
                call.arguments,
                size_bytes=call.size_bytes,
                timeout=call.timeout,
                cap=cap,
            ),
            calls,
            parallel=parallel,
            timeout=timeout,
            max_workers=self.settings.max_parallel,
        )

    def ping(self, timeout: float | None = None) -> float:
        """Round-trip time of an MCP ``ping``, in seconds (2026-07-28 has no ping: there a
        ``server/discover`` is the cheapest round trip)."""
        method = "server/discover" if self.negotiated_version == MODERN_VERSION else "ping"
        started = time.monotonic()
        self._request(method, {}, timeout=timeout or self.timeouts.request_s)
        return time.monotonic() - started

    # --- internals ------------------------------------------------------------------------------

    def _call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        size_bytes: int | None,
        timeout: float | None,
        cap: float | None,
    ) -> ToolResult:
        self._ready_binding()
        tool = self._registry.get(name, self._load_tools)
        tool.check_arguments(arguments)
        limit = timeout if timeout is not None else self.timeouts.for_size(size_bytes)
        if cap is not None:
            limit = min(limit, cap)
        params: JsonObject = {"name": name, "arguments": dict(arguments)}
        if self._listeners.on_progress is not None:
            params["_meta"] = {"progressToken": f"doclane-{next(self._progress_tokens)}"}
        headers = (
            param_headers(self._header_declarations(tool), arguments)
            if self._binding.protocol_version == MODERN_VERSION
            else None
        )
        started = time.monotonic()
        raw = self._request("tools/call", params, timeout=limit, headers=headers)
        raw = self._complete(raw, params, limit, headers, started)
        result = ToolResult.from_wire(name, raw, time.monotonic() - started)
        if not result.is_error:
            tool.check_output(result.structured)
        return result

    def _header_declarations(self, tool: Tool) -> HeaderDeclarations:
        """The tool's ``x-mcp-header`` declarations, found once per tool definition (walking
        its schema on every call cost more than the rest of the request's stamping)."""
        known = self._declarations.get(tool.name)
        if known is None or known[0] is not tool:
            known = (tool, header_declarations(tool.input_schema))
            self._declarations[tool.name] = known
        return known[1]

    def _ready_binding(self) -> Binding:
        state = self._lifecycle.state
        if state is _S.READY:
            return self._binding
        if state is _S.REINITIALIZING:
            return self._recover(self._binding, "the session was lost before this request")
        if state is _S.CLOSED:
            raise NotInitialized("the client is closed")
        if state is _S.INITIALIZING:
            raise NotInitialized("initialize() has not finished")
        raise NotInitialized("call initialize() before using the client")

    def _complete(
        self,
        raw: JsonObject,
        params: JsonObject,
        limit: float,
        headers: dict[str, str] | None,
        started: float,
    ) -> JsonObject:
        """Finish a multi-round-trip result (2026-07-28): retry the call, a new request each
        time, carrying the answers to its ``inputRequests`` and its ``requestState`` echoed
        exactly (or none when it gave none), until the server answers in full, within the
        call's deadline. A result without ``resultType`` is complete."""
        for _round in range(_MAX_INPUT_ROUNDS):
            if raw.get("resultType") != "input_required":
                return raw
            retry: JsonObject = dict(params)
            requests = raw.get("inputRequests")
            if requests:
                retry["inputResponses"] = self._answer_inputs(requests)
            state = raw.get("requestState")
            if isinstance(state, str):
                retry["requestState"] = state
            elif not requests:
                raise ParseError("an input_required result with neither input nor state")
            remaining = limit - (time.monotonic() - started)
            if remaining <= 0:
                raise CallTimeout(f"tools/call: no answer within {limit:g}s")
            raw = self._request("tools/call", retry, timeout=remaining, headers=headers)
        raise UnexpectedError(f"the server asked for more than {_MAX_INPUT_ROUNDS} rounds")

    def _answer_inputs(self, requests: Any) -> JsonObject:
        if self._on_input_request is None or not isinstance(requests, Mapping):
            raise MissingCapability(
                "the server asks the client for input (sampling, elicitation), which doclane, "
                "a batch pipeline, cannot give",
                detail={"input_requests": sorted(requests)[:10] if requests else []},
            )
        answers: JsonObject = {}
        for key, request in requests.items():
            if not isinstance(request, Mapping) or not isinstance(request.get("method"), str):
                raise ParseError(f"malformed input request {key!r}")
            answers[key] = self._on_input_request(request["method"], request.get("params") or {})
        return answers

    def _request(
        self,
        method: str,
        params: JsonObject,
        *,
        timeout: float,
        headers: dict[str, str] | None = None,
    ) -> JsonObject:
        """A request on the current session, re-initializing once if the server forgot it."""
        deadline = Deadline(timeout)
        binding = self._ready_binding()
        try:
            return self._session.request(
                method, params, timeout=timeout, binding=binding, headers=headers
            )
        except SessionExpired as lost:
            binding = self._recover(binding, lost.message)
        remaining = deadline.remaining()
        if remaining <= 0:
            raise CallTimeout(f"{method}: no time left after re-initializing")
        try:
            return self._session.request(
                method, params, timeout=remaining, binding=binding, headers=headers
            )
        except SessionExpired as exc:
            raise SessionExpired(
                f"{method}: the server forgot the new session as well", http_status=404
            ) from exc

    def _recover(self, stale: Binding, reason: str) -> Binding:
        """Re-initialize unless another thread already has; E308 if it cannot be done."""
        with self._handshake_lock:
            state = self._lifecycle.state
            if state is _S.READY and self._binding != stale:
                return self._binding
            if state not in (_S.READY, _S.REINITIALIZING):
                raise NotInitialized(f"cannot re-initialize a {state.value} client")
            self._reinitialize_locked(stale, reason)
            return self._binding

    def _reinitialize_locked(self, stale: Binding, reason: str) -> None:
        if self._lifecycle.state is _S.READY:
            self._lifecycle.move(_S.REINITIALIZING, f"{reason} {_short(stale.session_id)}".rstrip())
        try:
            self._handshake()
        except _PipelineError as exc:
            self._lifecycle.move(
                _S.REINITIALIZING, f"re-initialize failed: {exc.code}: {exc.message}"
            )
            raise SessionExpired(
                f"the session was lost and re-initializing failed: {exc.code}: {exc.message}",
                http_status=404,
                detail={"cause": exc.to_dict()},
            ) from exc
        self._lifecycle.move(_S.READY, "re-initialized: " + self._ready_reason())

    def _handshake(self) -> ServerInfo:
        """Stateless discovery where asked for and offered, else the 2025 handshake."""
        if self.protocol_version in (AUTO, MODERN_VERSION):
            server = self._discover()
            if server is not None:
                return server
        return self._initialize_session()

    def _discover(self) -> ServerInfo | None:
        """``server/discover`` -> checks -> tools/list; None: fall back to ``initialize``.

        Only ``auto`` falls back, and only on an answer that says "not this revision" (a
        JSON-RPC or HTTP refusal, or a discovery without 2026-07-28); a server that cannot be
        reached, is too slow or refuses our credentials is that, whatever its revision.
        """
        auto = self.protocol_version == AUTO
        binding = Binding(None, MODERN_VERSION)
        generation = self._registry.generation
        for attempt in (1, 2):
            try:
                result = self._session.request(
                    "server/discover", {}, timeout=self.timeouts.request_s, binding=binding
                )
                break
            except _PipelineError as exc:
                if attempt == 1 and _names_the_revision(exc):
                    continue  # -32022 naming 2026-07-28 among its versions: ask once more
                if not _refused_the_revision(exc):
                    raise
                if auto:
                    logger.info("%s: no 2026-07-28 discovery (%s); initializing", self._shown, exc)
                    return None
                raise MissingCapability(
                    f"the server does not offer protocol {MODERN_VERSION}: "
                    f"{exc.code}: {exc.message}",
                    detail={"cause": exc.to_dict()},
                ) from exc
        discovery = Discovery.from_wire(result)
        if MODERN_VERSION not in discovery.versions:
            if auto:
                return None
            raise MissingCapability(
                f"the server offers protocol {', '.join(discovery.versions) or '(none)'}, "
                f"not {MODERN_VERSION}",
                detail={"supported": list(discovery.versions)},
            )
        server = ServerInfo.from_wire(
            {
                "protocolVersion": MODERN_VERSION,
                "capabilities": discovery.capabilities,
                "serverInfo": discovery.server_info,
            }
        )
        self._check_tools(server)
        tools = self._list_tools(binding) if server.has_tools else []
        self._binding, self._server = binding, server
        self._registry.replace(tools, generation)
        return server

    def _initialize_session(self) -> ServerInfo:
        """initialize -> checks -> notifications/initialized -> tools/list (all pages)."""
        asked = LATEST_PROTOCOL_VERSION if self.protocol_version == AUTO else self.protocol_version
        params = {
            "protocolVersion": asked,
            "capabilities": {},
            "clientInfo": {"name": "doclane", "version": __version__},
        }
        generation = self._registry.generation
        exchange = self._session.exchange(
            "initialize", params, timeout=self.timeouts.request_s, binding=Binding()
        )
        server = ServerInfo.from_wire(exchange.result)
        binding = Binding(exchange.session_id, server.protocol_version)
        try:
            if server.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
                raise MissingCapability(
                    f"the server answered protocol {server.protocol_version!r}; doclane speaks "
                    + ", ".join(SUPPORTED_PROTOCOL_VERSIONS),
                    detail={"server_version": server.protocol_version},
                )
            self._check_tools(server)
            self._session.notify(
                "notifications/initialized", binding=binding, timeout=self.timeouts.request_s
            )
            tools = self._list_tools(binding) if server.has_tools else []
        except BaseException:
            self._transport.delete(binding)  # leave no half-made session behind
            raise
        self._binding, self._server = binding, server
        self._registry.replace(tools, generation)
        return server

    def _check_tools(self, server: ServerInfo) -> None:
        """E305 for a server without tools, unless this client was told to accept one."""
        if self._require_tools and not server.has_tools:
            raise MissingCapability(
                "the server declares no tools capability",
                detail={"capabilities": sorted(server.capabilities)},
            )

    def _list_tools(self, binding: Binding) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _page in range(_MAX_TOOL_PAGES):
            params: JsonObject = {} if cursor is None else {"cursor": cursor}
            result = self._session.request(
                "tools/list", params, timeout=self.timeouts.request_s, binding=binding
            )
            page, cursor = tools_page(result)
            tools.extend(self._usable(page))
            if cursor is None:
                return tools
            if cursor in seen:
                raise ParseError(f"tools/list repeated the cursor {cursor!r}")
            seen.add(cursor)
        raise ParseError(f"tools/list did not end after {_MAX_TOOL_PAGES} pages")

    def _usable(self, tools: list[Tool]) -> list[Tool]:
        """Tools whose ``x-mcp-header`` declarations can be honoured; the others are left out
        (a call of one is E304), as the 2026-07-28 revision asks of a client."""
        kept = []
        for tool in tools:
            problem = invalid_header_declaration(tool.input_schema)
            if problem is None:
                kept.append(tool)
            else:
                logger.warning("%s: leaving out tool %s: %s", self._shown, tool.name, problem)
        return kept

    def _load_tools(self) -> list[Tool]:
        """Refetch the tool list for the registry, through the recovering request path."""
        binding = self._ready_binding()
        try:
            return self._list_tools(binding)
        except SessionExpired as lost:
            self._recover(binding, lost.message)
            return self._list_tools(self._binding)

    def _tools_changed(self) -> None:
        logger.info("%s: the tool list changed; refreshing it on next use", self._shown)
        self._registry.invalidate()

    def _ready_reason(self) -> str:
        server, binding = self._server, self._binding
        assert server is not None
        who = f"{server.name} {server.version}".strip() or "server"
        return (
            f"{who}, protocol {binding.protocol_version}, session {_short(binding.session_id)}, "
            f"{self._registry.stats().size} tools"
        )


def _names_the_revision(exc: _PipelineError) -> bool:
    """A -32022 ("unsupported protocol version") whose supported versions include ours: the
    server refused this request, not the revision, so asking again is worth it once."""
    detail = exc.detail if isinstance(exc.detail, Mapping) else {}
    supported = detail.get("supported")
    return (
        exc.jsonrpc_code == UNSUPPORTED_PROTOCOL_VERSION
        and isinstance(supported, list)
        and MODERN_VERSION in supported
    )


def _refused_the_revision(exc: _PipelineError) -> bool:
    """Whether ``server/discover`` failed because the server answered "not this revision"
    (a JSON-RPC error, or an HTTP 4xx that is not about credentials), as opposed to being
    unreachable, too slow, failing (5xx) or refusing us: only the former means "try the 2025
    handshake", as the official SDK's probe decides too."""
    if isinstance(exc, ProtocolError | MissingCapability) or exc.jsonrpc_code is not None:
        return exc.code != "E310"
    status = exc.http_status
    return status is not None and 400 <= status < 500 and status not in (401, 403, 429)


def _short(session_id: str | None) -> str:
    if not session_id:
        return "(none)"
    return session_id[:8] + ("..." if len(session_id) > 8 else "")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _PipelineError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
