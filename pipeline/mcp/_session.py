"""JSON-RPC over a transport: ids, correlation, server requests, notifications, cancellation.

Ids are unique per client (one counter for every thread), and each request waits on its own
pending slot, filled by whichever reply stream carries the response with its id: its own POST's
stream, a resumed GET, another request's stream, or over stdio the child's one stdout.
Notifications go to listeners (progress, logging, tools/list_changed, anything); server
requests are answered at once, on the transport they came by: ``ping`` with ``{}``, anything
else with -32601, since the client declares no capabilities that would invite them. A request
that times out, or that its caller withdraws (a ``CancelScope`` around it was cancelled), is
followed by ``notifications/cancelled`` so the server can stop working on it; on the stateless
2026-07-28 wire there is no such notification, and the ended connection is the signal. Under
that revision every request is stamped with the request metadata and its routing headers
(:mod:`._revision`).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from errors import CallCancelled, CallTimeout, ParseError, PipelineError, classify_jsonrpc
from pipeline.mcp._revision import MODERN_VERSION, stamp
from pipeline.mcp.protocol import (
    JsonObject,
    LogMessage,
    Progress,
    RequestId,
    error_message,
    message_kind,
    notification_message,
    request_message,
    result_message,
)
from pipeline.mcp.transport import Binding, Outgoing, Transport
from pipeline.mcp.watchdog import current_scope
from pipeline.support.tracing import mcp_request_span

logger = logging.getLogger("doclane.mcp.session")

METHOD_NOT_FOUND = -32601
#: How long we give the server to take a cancellation or an answer to its own request.
_COURTESY_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Listeners:
    """Callbacks for what the server sends besides responses. Exceptions in them are logged."""

    on_progress: Callable[[Progress], None] | None = None
    on_log: Callable[[LogMessage], None] | None = None
    on_tools_changed: Callable[[], None] | None = None
    #: Every notification, by method and params (after the specific callbacks).
    on_notification: Callable[[str, JsonObject], None] | None = None


@dataclass(frozen=True, slots=True)
class Exchange:
    """A request's result and the session id its reply announced (``initialize`` needs it)."""

    result: JsonObject
    session_id: str | None


class _Pending:
    """The slot one request's response lands in."""

    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.response: JsonObject | None = None
        self.done = threading.Event()

    def resolve(self, response: JsonObject) -> None:
        if not self.done.is_set():
            self.response = response
            self.done.set()


class JsonRpcSession:
    """Requests and notifications over one transport; safe to use from many threads."""

    def __init__(
        self,
        transport: Transport,
        *,
        listeners: Listeners | None = None,
        courtesy_timeout: float = _COURTESY_TIMEOUT_S,
        client_info: JsonObject | None = None,
    ) -> None:
        self.transport = transport
        #: Who we are, as the 2026-07-28 request metadata says it on every request.
        self.client_info: JsonObject = client_info or {"name": "doclane", "version": "0"}
        self.listeners = listeners or Listeners()
        self.courtesy_timeout = courtesy_timeout
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self._pending: dict[RequestId, _Pending] = {}
        self._pending_lock = threading.Lock()

    def next_id(self) -> int:
        with self._id_lock:
            return next(self._ids)

    @property
    def in_flight(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    def exchange(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        timeout: float,
        binding: Binding,
        headers: Mapping[str, str] | None = None,
    ) -> Exchange:
        """Send one request and return its result; a JSON-RPC error is raised as its E2xx/E3xx."""
        request_id = self.next_id()
        pending = _Pending()
        with self._pending_lock:
            self._pending[request_id] = pending

        def sink(message: JsonObject) -> bool:
            self._receive(message, binding, pending)
            return pending.done.is_set()

        scope = current_scope()
        if scope is not None:
            scope.check(f"{method} (id {request_id})")
        message = request_message(request_id, method, params)
        wire_headers = dict(headers or {})
        if binding.protocol_version == MODERN_VERSION:
            wire_headers.update(stamp(message, MODERN_VERSION, self.client_info))
        # One client span per request, its context in params._meta (SEP-414); free when off.
        with mcp_request_span(message, binding.session_id, binding.protocol_version):
            try:
                reply = self.transport.post(
                    Outgoing(message, binding, timeout, sink, scope, wire_headers)
                )
            except CallTimeout:
                self._cancel(request_id, binding, f"no answer within {timeout:g}s")
                raise
            except CallCancelled:  # it was (or may have been) sent: the server may be at work
                reason = scope.reason if scope is not None else "cancelled"
                self._cancel(request_id, binding, f"withdrawn by the client: {reason}")
                raise
            finally:
                with self._pending_lock:
                    self._pending.pop(request_id, None)
        return Exchange(_unwrap(pending.response, method, request_id), reply.session_id)

    def notify(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        binding: Binding,
        timeout: float = _COURTESY_TIMEOUT_S,
    ) -> None:
        self.transport.post(Outgoing(notification_message(method, params), binding, timeout))

    # --- what comes back -------------------------------------------------------------------------

    def _receive(self, message: JsonObject, binding: Binding, awaited: _Pending) -> None:
        kind = message_kind(message)
        if kind in ("response", "error"):
            self._resolve(message, awaited)
        elif kind == "notification":
            self._notify_listeners(message["method"], message.get("params") or {})
        else:
            self._answer(message, binding)

    def _resolve(self, message: JsonObject, awaited: _Pending) -> None:
        request_id = message.get("id")
        if request_id is None:
            # An error the server could not tie to an id: it is about the request on this reply.
            awaited.resolve(message)
            return
        with self._pending_lock:
            pending = self._pending.get(request_id)
        if pending is None:
            logger.warning("dropping a response to unknown or finished request %r", request_id)
            return
        pending.resolve(message)

    def _notify_listeners(self, method: str, params: JsonObject) -> None:
        listeners = self.listeners
        try:
            if method == "notifications/progress" and listeners.on_progress is not None:
                progress = Progress.from_wire(params)
                if progress is not None:
                    listeners.on_progress(progress)
            elif method == "notifications/message" and listeners.on_log is not None:
                listeners.on_log(LogMessage.from_wire(params))
            elif (
                method == "notifications/tools/list_changed"
                and listeners.on_tools_changed is not None
            ):
                listeners.on_tools_changed()
            if listeners.on_notification is not None:
                listeners.on_notification(method, params)
        except Exception:
            logger.exception("a listener for %s failed", method)

    def _answer(self, request: JsonObject, binding: Binding) -> None:
        """Answer a server-to-client request on a separate POST."""
        method, request_id = request["method"], request["id"]
        if method == "ping":
            answer = result_message(request_id, {})
        else:
            logger.info("refusing server request %s: capability not declared", method)
            answer = error_message(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
        try:
            self.transport.post(Outgoing(answer, binding, self.courtesy_timeout))
        except PipelineError as exc:
            logger.warning("could not answer server request %s: %s", method, exc)

    def _cancel(self, request_id: RequestId, binding: Binding, reason: str) -> None:
        """Tell the server to stop working on a request we gave up on (best effort)."""
        if binding.protocol_version == MODERN_VERSION:
            return  # 2026-07-28: the request's ended connection is the cancellation
        try:
            self.notify(
                "notifications/cancelled",
                {"requestId": request_id, "reason": reason},
                binding=binding,
                timeout=self.courtesy_timeout,
            )
        except PipelineError as exc:
            logger.info("could not cancel request %s: %s", request_id, exc)


def _unwrap(response: JsonObject | None, method: str, request_id: RequestId) -> JsonObject:
    if response is None:
        raise ParseError(f"{method} (id {request_id}): the reply carried no response")
    if "error" in response:
        error = response["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            raise ParseError(f"{method} (id {request_id}): malformed error {error!r}")
        text = str(error.get("message", "")) or f"JSON-RPC error {error['code']}"
        raise classify_jsonrpc(error["code"], f"{method}: {text}", error.get("data"))
    result = response.get("result")
    if not isinstance(result, dict):
        raise ParseError(f"{method} (id {request_id}): result is not an object: {result!r}")
    return result
