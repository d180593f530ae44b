"""The ASGI layer in front of the SDK's Streamable HTTP app: counting, auth and HTTP-level faults.

Everything that must bend HTTP itself lives here, because the SDK's transport cannot be told to:
answering 5xx/4xx/429 instead of the MCP server, a 200 whose body is garbage, requiring a
credential, and cutting an SSE stream short. It also reads every POST body once, so it can count
requests by JSON-RPC method and tool and decide *whether* a request is a fault target; faults that
belong to the MCP layer (JSON-RPC errors, ``isError``, hang, resumable stream drops) are handed
down in an :class:`Exchange` stored in the ASGI scope, which the MCP handlers reach through
``ctx.request.scope``.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.fakes.event_store import SessionScope, current_session
from tests.fakes.oauth_resource import challenge, is_oauth, token_is_active
from tests.fakes.state import FakeState

EXCHANGE_KEY = "fake_docling.exchange"
_EVENT_ID_LINE = re.compile(rb"(?:^|[\r\n])id:")


@dataclass
class Exchange:
    """One HTTP request to the MCP endpoint, as the fault machinery sees it."""

    verb: str
    method: str | None = None
    request_id: Any = None
    tool: str | None = None
    fault: str | None = None
    event_with_id_sent: anyio.Event = field(default_factory=anyio.Event)
    truncate_requested: bool = False
    truncated: bool = False


def describe_body(body: bytes) -> tuple[str, dict[str, Any] | None]:
    """The counting key of a POST body (its JSON-RPC method, or a pseudo-name) and the message."""
    try:
        message = json.loads(body)
    except ValueError:
        return "(unparseable)", None
    if isinstance(message, list):
        return "(batch)", None
    if not isinstance(message, dict):
        return "(unparseable)", None
    if isinstance(message.get("method"), str):
        return message["method"], message
    if "result" in message or "error" in message:
        return "(response)", message
    return "(unparseable)", message


class HttpFaultLayer:
    """Wraps the app; only requests to ``mcp_path`` are inspected."""

    def __init__(self, app: ASGIApp, state: FakeState, mcp_path: str = "/mcp") -> None:
        self.app = app
        self.state = state
        self.mcp_path = mcp_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.mcp_path:
            await self.app(scope, receive, send)
            return
        state, stats = self.state, self.state.stats
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        verb = scope["method"]
        stats.http_requests_by_verb[verb] += 1

        message: dict[str, Any] | None = None
        key = verb
        if verb == "POST":
            body, receive = await _buffered(receive)
            key, message = describe_body(body)
            stats.requests_by_method[key] += 1
        exchange = Exchange(verb=verb, method=key)
        self._record(exchange, headers, message)

        session_id = headers.get("mcp-session-id")
        session_scope = state.sessions.get(session_id) if session_id else None
        if session_scope is None:
            session_scope = SessionScope()
        token = current_session.set(session_scope)
        try:
            if not await self._authorized(headers):
                stats.auth_rejections += 1
                await _json_error(send, 401, "Unauthorized", exchange.request_id,
                                  {"www-authenticate": self._challenge(headers)})  # fmt: skip
                return
            is_request = message is not None and "id" in message and key not in ("(response)",)
            exchange.fault = state.take_fault(key, exchange.tool, is_request=is_request)
            if exchange.fault is not None and exchange.fault.startswith("http"):
                await self._http_fault(send, int(exchange.fault[4:]), exchange)
                return
            if exchange.fault in ("garbage", "garbage_sse"):
                await _garbage(send, sse=exchange.fault == "garbage_sse")
                return
            if not state.knobs.stateless and (
                key == "server/discover" or headers.get("mcp-protocol-version") == "2026-07-28"
            ):
                # A server of the 2025 revisions: the method does not exist (-32601), as
                # docling-mcp before 3.3 answered; in the body, like the SDK's HTTP 200.
                await _json_error(send, 200, "Method not found", exchange.request_id, {},
                                  code=-32601)  # fmt: skip
                return
            knobs = state.knobs
            if exchange.method == "tools/call" and knobs.oversize_reply_bytes:
                await _oversize(send, exchange.request_id, knobs.oversize_reply_bytes,
                                shape=knobs.oversize_as)  # fmt: skip
                return
            scope[EXCHANGE_KEY] = exchange
            watched = self._watching(send, exchange, session_scope)
            if exchange.method in knobs.shape_methods and (knobs.keepalive_s or knobs.trickle_s):
                await _shaped(self.app, scope, receive, watched, state)
            else:
                await self.app(scope, receive, watched)
        finally:
            current_session.reset(token)

    def _record(
        self, exchange: Exchange, headers: dict[str, str], message: dict[str, Any] | None
    ) -> None:
        stats = self.state.stats
        stats.last_request_headers = headers
        stats.last_headers_by_method[exchange.method or exchange.verb] = headers
        if session_id := headers.get("mcp-session-id"):
            self.state.record_session_seen(session_id)
        if exchange.verb == "DELETE":
            stats.deletes += 1
        if exchange.verb == "GET" and (last_event_id := headers.get("last-event-id")):
            stats.last_event_ids.append(last_event_id)
            if stats.last_drop_at is not None:
                stats.resume_delays_s.append(round(time.monotonic() - stats.last_drop_at, 4))
        if message is None:
            return
        exchange.request_id = message.get("id")
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        if exchange.method == "initialize":
            stats.initialize_calls += 1
        elif exchange.method == "tools/call" and isinstance(params.get("name"), str):
            exchange.tool = params["name"]
            stats.requests_by_tool[exchange.tool] += 1
        elif exchange.method == "notifications/cancelled":
            stats.cancelled.append(params)
        elif exchange.method == "(response)":
            answer: dict[str, Any] = {
                k: message[k] for k in ("id", "result", "error") if k in message
            }
            stats.client_responses.append(answer)

    async def _authorized(self, headers: dict[str, str]) -> bool:
        rule = self.state.knobs.require_auth
        if rule is None:
            return True
        if is_oauth(rule):
            return await token_is_active(rule, headers.get("authorization"))
        if "bearer" in rule:
            return headers.get("authorization") == f"Bearer {rule['bearer']}"
        return headers.get(rule["header"].lower()) == rule["value"]

    def _challenge(self, headers: dict[str, str]) -> str:
        rule = self.state.knobs.require_auth
        if rule is not None and is_oauth(rule):
            return challenge(rule, headers.get("host", "127.0.0.1"))
        return 'Bearer realm="fake-docling"'

    async def _http_fault(self, send: Send, status: int, exchange: Exchange) -> None:
        extra: dict[str, str] = {}
        if status == 429:
            extra["retry-after"] = str(self.state.knobs.retry_after_s)
        elif status == 401:
            extra["www-authenticate"] = 'Bearer realm="fake-docling"'
        await _json_error(send, status, f"injected HTTP {status}", exchange.request_id, extra)

    def _watching(self, send: Send, exchange: Exchange, session_scope: SessionScope) -> Send:
        """``send`` that notes issued sessions and SSE event ids, and can cut the stream short."""
        state = self.state

        async def watched(message: Message) -> None:
            if exchange.truncated:
                return
            if message["type"] == "http.response.start":
                response_headers = {
                    k.decode("latin-1").lower(): v.decode("latin-1")
                    for k, v in message.get("headers", [])
                }
                session_id = response_headers.get("mcp-session-id")
                if exchange.method == "initialize" and session_id and message["status"] < 400:
                    state.record_session_issued(session_id, session_scope)
                if exchange.verb == "DELETE" and message["status"] == 200:
                    state.sessions.pop(session_scope.session_id or "", None)
                if exchange.truncate_requested:
                    await _truncate(send, session_id)
                    exchange.truncated = True
                    return
            elif message["type"] == "http.response.body":
                if exchange.truncate_requested:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    exchange.truncated = True
                    return
                if _EVENT_ID_LINE.search(message.get("body", b"")):
                    exchange.event_with_id_sent.set()
            await send(message)

        return watched


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """Read the whole request body; return it and a ``receive`` that replays it first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def _json_error(
    send: Send,
    status: int,
    text: str,
    request_id: Any,
    extra_headers: dict[str, str],
    code: int | None = None,
) -> None:
    if code is None:
        code = -32000 if status >= 500 else -32600
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra_headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _garbage(send: Send, *, sse: bool) -> None:
    if sse:
        content_type, body = b"text/event-stream", b"event: message\ndata: {this is not json\n\n"
    else:
        content_type, body = b"application/json", b"<html>this is not JSON{"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _truncate(send: Send, session_id: str | None) -> None:
    """Start an SSE response and end it at once: a stream closed before any event."""
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    if session_id:
        headers.append((b"mcp-session-id", session_id.encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


_KEEPALIVES = {
    "comment": b": keep-alive\r\n\r\n",
    "empty_event": b"event: message\r\ndata:\r\n\r\n",
    "notification": b"event: message\r\ndata: "
    + json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "logger": "fake-docling", "data": "still converting"},
        }
    ).encode()
    + b"\r\n\r\n",
}


async def _shaped(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, state: FakeState
) -> None:
    """Run the MCP app with its reply kept alive (SSE keep-alives) and/or trickled bytewise.

    Keep-alives go out between the app's own SSE events (never inside one), every
    ``keepalive_s``, for as long as the reply is open: the way an SDK server keeps a slow tool's
    stream from idling out, only faster, so a client whose timeout restarts on every byte never
    times out.
    """
    knobs, stats = state.knobs, state.stats
    lock = anyio.Lock()
    sse_open = anyio.Event()
    finished = False

    async def shaped_send(message: Message) -> None:
        nonlocal finished
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers", []))
            if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                sse_open.set()
        elif message["type"] == "http.response.body":
            body, more = message.get("body", b""), message.get("more_body", False)
            async with lock:
                if knobs.trickle_s and body:
                    for index in range(len(body)):
                        chunk = body[index : index + 1]
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                        stats.trickled_bytes += 1
                        await anyio.sleep(knobs.trickle_s)
                    body = b""
                finished = not more
                await send({"type": "http.response.body", "body": body, "more_body": more})
            return
        async with lock:
            await send(message)

    async def keep_alive(every: float) -> None:
        await sse_open.wait()
        for turn in itertools.count():
            await anyio.sleep(every)
            async with lock:
                if finished:
                    return
                kind = knobs.keepalive_kinds[turn % len(knobs.keepalive_kinds)]
                await send({"type": "http.response.body", "body": _KEEPALIVES[kind],
                            "more_body": True})  # fmt: skip
                stats.keepalives_sent += 1

    async with anyio.create_task_group() as group:
        if knobs.keepalive_s:
            group.start_soon(keep_alive, knobs.keepalive_s)
        await app(scope, receive, shaped_send)
        group.cancel_scope.cancel()


async def _oversize(send: Send, request_id: Any, size: int, *, shape: str) -> None:
    """A tools/call result whose text is ``size`` bytes, streamed in 1 MiB pieces (``json_cut``:
    a JSON body without its closing bytes)."""
    head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode()
    head += b', "result": {"isError": false, "content": [{"type": "text", "text": "'
    tail = b'"}]}}' if shape != "json_cut" else b""
    content_type = b"text/event-stream" if shape == "sse" else b"application/json"
    if shape == "sse":
        head, tail = b"event: message\r\ndata: " + head, tail + b"\r\n\r\n"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", content_type)]})  # fmt: skip
    await send({"type": "http.response.body", "body": head, "more_body": True})
    piece = b"x" * (1024 * 1024)
    left = size
    while left > 0:
        chunk = piece if left >= len(piece) else piece[:left]
        left -= len(chunk)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": tail, "more_body": False})
