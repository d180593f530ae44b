"""The friendly MCP client: lifecycle, tool registry, size-aware calls, batches, ping, close.

Layers, as in the MCP SDK's client: a transport behind a tiny protocol (:mod:`.transport`,
built by :func:`.connect.transport_for` unless the caller hands one in), a JSON-RPC session
above it (:mod:`._session`), the handshake that opens it (:mod:`._handshake`: which revision,
``initialize`` or ``server/discover``, the capability check), and this class on top, which is
all callers see. Tool errors are results (``ToolResult.is_error``), never exceptions;
everything else that goes wrong is a catalog error.

The client never initializes on its own accord: the caller calls :meth:`initialize` (a tool
call before that is E301). In session mode the client *re*-initializes by itself: when the
server answers HTTP 404 to a session it had given us (it restarted, or expired the session), it
runs the handshake again, once, and resends the request; only if that fails does the caller see
E308. Stateless mode has no session to lose. One client is meant to be shared by every thread
of a worker process.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from errors import (
    CallTimeout,
    NotInitialized,
    SessionExpired,
)
from errors import PipelineError as _PipelineError
from pipeline import __version__
from pipeline.mcp._handshake import Handshake
from pipeline.mcp._input_rounds import InputHandler, complete_input_required
from pipeline.mcp._revision import MODERN_VERSION, ParamHeaders
from pipeline.mcp._session import JsonRpcSession, Listeners
from pipeline.mcp.batch import CallOutcome, ToolCall, run_batch
from pipeline.mcp.connect import transport_for
from pipeline.mcp.endpoints import origin_of
from pipeline.mcp.lifecycle import (
    Lifecycle,
    LifecycleState,
    Transition,
    describe_failure,
    format_trail,
    short_session_id,
)
from pipeline.mcp.protocol import JsonObject, LogMessage, Progress, ServerInfo, Tool, ToolResult
from pipeline.mcp.registry import RegistryStats, ToolRegistry
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.timeouts import CallTimeouts, Deadline
from pipeline.mcp.transport import Binding, Transport
from pipeline.support.closing import Closing
from pipeline.support.secrets import mask_address

logger = logging.getLogger("doclane.mcp.client")


class McpClient(Closing):
    """A client of one MCP endpoint; see the module docstring and docs/architecture.md.

    ``endpoint`` is used exactly as given (default: the settings' first endpoint).
    ``transport`` is the wire to talk over; without one, :func:`.connect.transport_for` builds
    what the endpoint needs, with ``auth`` (default: from the settings) over HTTP.
    ``on_input_request(method, params) -> result`` answers what a 2026-07-28 server asks in the
    middle of a call (elicitation, sampling, roots); without it such a call is E305, as doclane,
    a batch pipeline, has nobody to ask. ``require_tools=False`` accepts a server without the
    ``tools`` capability (the conformance suite's ``initialize`` scenario); doclane itself
    always needs tools.
    """

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
        self.settings = settings if settings is not None else McpSettings.from_environment()
        if endpoint is None:
            endpoint = transport.endpoint if transport is not None else self.settings.endpoint
        self._endpoint = endpoint
        self._shown = mask_address(endpoint)
        self.timeouts = timeouts or CallTimeouts.from_settings(self.settings)
        self._transport: Transport = transport or transport_for(
            endpoint, self.settings, auth=auth, connect_timeout=self.timeouts.connect_s
        )
        self._session = JsonRpcSession(
            self._transport,
            listeners=Listeners(
                on_progress=on_progress,
                on_log=on_log,
                on_tools_changed=self._tools_changed,
                on_notification=on_notification,
            ),
            courtesy_timeout=self.timeouts.request_s,
            client_info={"name": "doclane", "version": __version__},
        )
        self._lifecycle = Lifecycle()
        self._registry = ToolRegistry(
            registry_ttl if registry_ttl is not None else self.settings.registry_ttl_s
        )
        self._handshake = Handshake(
            self._session,
            protocol_version=protocol_version or self.settings.protocol_version,
            timeout=self.timeouts.request_s,
            require_tools=require_tools,
            registry_generation=lambda: self._registry.generation,
            shown=self._shown,
        )
        self._binding = Binding()
        self._server: ServerInfo | None = None
        self._handshake_lock = threading.Lock()
        self._progress_tokens = itertools.count(1)
        self._on_input_request = on_input_request
        self._param_headers = ParamHeaders()

    # --- what it is -----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self._endpoint

    @property
    def protocol_version(self) -> str:
        """The revision asked for: ``auto`` or one pinned (``MCP_PROTOCOL_VERSION``)."""
        return self._handshake.protocol_version

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
            if state is LifecycleState.READY and self._server is not None:
                return self._server
            if state is LifecycleState.CLOSED:
                raise NotInitialized("the client is closed")
            if state is LifecycleState.REINITIALIZING:
                self._reinitialize_locked(self._binding, "initialize() called")
            else:
                self._lifecycle.move(
                    LifecycleState.INITIALIZING,
                    f"initialize {self._shown}, asking for protocol {self.protocol_version}",
                )
                try:
                    self._establish()
                except BaseException as exc:
                    self._lifecycle.move(
                        LifecycleState.NEW, f"initialize failed: {describe_failure(exc)}"
                    )
                    raise
                self._lifecycle.move(LifecycleState.READY, self._ready_reason())
            assert self._server is not None
            return self._server

    def close(self) -> None:
        """End the session (``DELETE``) and release connections; idempotent, never raises."""
        with self._handshake_lock:
            if self._lifecycle.state is LifecycleState.CLOSED:
                return
            binding = self._binding
            self._lifecycle.move(LifecycleState.CLOSED, "close()")
        try:
            self._transport.delete(binding)
        except Exception:
            logger.warning("ending the session at %s failed", self._shown, exc_info=True)
        finally:
            self._transport.close()

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
        if self._session.listeners.on_progress is not None:
            params["_meta"] = {"progressToken": f"doclane-{next(self._progress_tokens)}"}
        headers = (
            self._param_headers.for_call(tool, arguments)
            if self._binding.protocol_version == MODERN_VERSION
            else None
        )
        started = time.monotonic()
        raw = self._request("tools/call", params, timeout=limit, headers=headers)
        raw = complete_input_required(
            raw,
            params,
            resend=lambda retry, remaining: self._request(
                "tools/call", retry, timeout=remaining, headers=headers
            ),
            answer=self._on_input_request,
            limit=limit,
            started=started,
        )
        result = ToolResult.from_wire(name, raw, time.monotonic() - started)
        if not result.is_error:
            tool.check_output(result.structured)
        return result

    def _ready_binding(self) -> Binding:
        state = self._lifecycle.state
        if state is LifecycleState.READY:
            return self._binding
        if state is LifecycleState.REINITIALIZING:
            return self._recover(self._binding, "the session was lost before this request")
        if state is LifecycleState.CLOSED:
            raise NotInitialized("the client is closed")
        if state is LifecycleState.INITIALIZING:
            raise NotInitialized("initialize() has not finished")
        raise NotInitialized("call initialize() before using the client")

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
            return self._session.exchange(
                method, params, timeout=timeout, binding=binding, headers=headers
            ).result
        except SessionExpired as lost:
            binding = self._recover(binding, lost.message)
        remaining = deadline.remaining()
        if remaining <= 0:
            raise CallTimeout(f"{method}: no time left after re-initializing")
        try:
            return self._session.exchange(
                method, params, timeout=remaining, binding=binding, headers=headers
            ).result
        except SessionExpired as exc:
            raise SessionExpired(
                f"{method}: the server forgot the new session as well", http_status=404
            ) from exc

    def _recover(self, stale: Binding, reason: str) -> Binding:
        """Re-initialize unless another thread already has; E308 if it cannot be done."""
        with self._handshake_lock:
            state = self._lifecycle.state
            if state is LifecycleState.READY and self._binding != stale:
                return self._binding
            if state not in (LifecycleState.READY, LifecycleState.REINITIALIZING):
                raise NotInitialized(f"cannot re-initialize a {state.value} client")
            self._reinitialize_locked(stale, reason)
            return self._binding

    def _reinitialize_locked(self, stale: Binding, reason: str) -> None:
        if self._lifecycle.state is LifecycleState.READY:
            lost = f"{reason} {short_session_id(stale.session_id)}".rstrip()
            self._lifecycle.move(LifecycleState.REINITIALIZING, lost)
        try:
            self._establish()
        except _PipelineError as exc:
            self._lifecycle.move(
                LifecycleState.REINITIALIZING, f"re-initialize failed: {exc.code}: {exc.message}"
            )
            raise SessionExpired(
                f"the session was lost and re-initializing failed: {exc.code}: {exc.message}",
                http_status=404,
                detail={"cause": exc.to_dict()},
            ) from exc
        self._lifecycle.move(LifecycleState.READY, "re-initialized: " + self._ready_reason())

    def _establish(self) -> None:
        """Run the handshake and keep what it learned: the binding, the server, its tools."""
        established = self._handshake.run()
        self._binding, self._server = established.binding, established.server
        self._registry.replace(established.tools, established.generation)

    def _load_tools(self) -> list[Tool]:
        """Refetch the tool list for the registry, through the recovering request path."""
        binding = self._ready_binding()
        try:
            return self._handshake.list_tools(binding)
        except SessionExpired as lost:
            self._recover(binding, lost.message)
            return self._handshake.list_tools(self._binding)

    def _tools_changed(self) -> None:
        logger.info("%s: the tool list changed; refreshing it on next use", self._shown)
        self._registry.invalidate()

    def _ready_reason(self) -> str:
        server, binding = self._server, self._binding
        assert server is not None
        who = f"{server.name} {server.version}".strip() or "server"
        session = short_session_id(binding.session_id)
        return (
            f"{who}, protocol {binding.protocol_version}, session {session}, "
            f"{self._registry.stats().size} tools"
        )
