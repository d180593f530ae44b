"""A deliberately naive Streamable HTTP client on raw httpx, to look at the fake's wire.

The official SDK client hides exactly what the fake's knobs bend (status codes, SSE event ids,
``retry`` fields, the order of messages on a stream), so the knob tests speak HTTP themselves.
This is a test instrument, not a client: no retries, no resumption unless asked.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent

ACCEPT = "application/json, text/event-stream"
PROTOCOL_VERSION = "2025-11-25"

#: Answers a server-to-client request: returns the JSON-RPC response to POST back, or None.
RequestAnswerer = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass
class RawReply:
    """One HTTP reply: status, headers, SSE events (if any) and the JSON-RPC messages in it."""

    status: int
    headers: httpx.Headers
    events: list[ServerSentEvent] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""

    @property
    def content_type(self) -> str:
        content_type: str = self.headers.get("content-type", "")
        return content_type.split(";", maxsplit=1)[0].strip()

    @property
    def response(self) -> dict[str, Any] | None:
        """The JSON-RPC response (result or error) in this reply, if one arrived."""
        found = [m for m in self.messages if "id" in m and ("result" in m or "error" in m)]
        return found[-1] if found else None

    @property
    def result(self) -> dict[str, Any]:
        response = self.response
        assert response is not None and "result" in response, f"no result in {self}"
        result: dict[str, Any] = response["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        """The JSON-RPC error of this reply's response (asserts there is one)."""
        response = self.response
        assert response is not None and "error" in response, f"no error in {self}"
        error: dict[str, Any] = response["error"]
        return error

    @property
    def response_id(self) -> Any:
        response = self.response
        assert response is not None, f"no response in {self}"
        return response["id"]

    @property
    def event_ids(self) -> list[str]:
        return [event.id for event in self.events if event.id]


def _json(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``; None for empty or unparseable text (kept raw by the caller)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class RawSession:
    """One MCP session over raw httpx."""

    def __init__(
        self,
        url: str,
        *,
        protocol_version: str = PROTOCOL_VERSION,
        headers: dict[str, str] | None = None,
        timeout: float = 15.0,
    ) -> None:
        self.url = url
        self.protocol_version = protocol_version
        self.extra_headers = dict(headers or {})
        self.http = httpx.Client(timeout=timeout)
        self.session_id: str | None = None
        self.last_id = 0
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RawSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"accept": ACCEPT, "content-type": "application/json", **self.extra_headers}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = self.protocol_version
        return {**headers, **(extra or {})}

    def next_id(self) -> int:
        self.last_id = next(self._ids)
        return self.last_id

    def post(
        self,
        message: dict[str, Any],
        *,
        answer: RequestAnswerer | None = None,
        timeout: float | None = None,
    ) -> RawReply:
        """POST one message; read an SSE reply until its response (answering server requests)."""
        kwargs: dict[str, Any] = {"headers": self.headers(), "content": json.dumps(message)}
        if timeout is not None:
            kwargs["timeout"] = timeout
        with self.http.stream("POST", self.url, **kwargs) as response:
            reply = RawReply(response.status_code, response.headers)
            if reply.content_type == "text/event-stream":
                self._read_events(EventSource(response), reply, message.get("id"), answer)
            else:
                reply.text = response.read().decode(errors="replace")
                if reply.content_type == "application/json" and (parsed := _json(reply.text)):
                    reply.messages.append(parsed)
        return reply

    def resume(self, last_event_id: str, *, answer: RequestAnswerer | None = None) -> RawReply:
        """GET the stream again after ``last_event_id``, until a response arrives or it ends."""
        headers = self.headers({"last-event-id": last_event_id, "accept": "text/event-stream"})
        headers.pop("content-type")
        with self.http.stream("GET", self.url, headers=headers) as response:
            reply = RawReply(response.status_code, response.headers)
            if reply.content_type == "text/event-stream":
                self._read_events(EventSource(response), reply, None, answer)
            else:
                reply.text = response.read().decode(errors="replace")
        return reply

    def _read_events(
        self,
        source: EventSource,
        reply: RawReply,
        request_id: Any,
        answer: RequestAnswerer | None,
    ) -> None:
        for event in source.iter_sse():
            reply.events.append(event)
            message = _json(event.data)
            if message is None:
                continue
            reply.messages.append(message)
            if "method" in message and "id" in message and answer is not None:
                response = answer(message)
                if response is not None:
                    self.http.post(self.url, headers=self.headers(), content=json.dumps(response))
            is_response = "result" in message or "error" in message
            if is_response and (request_id is None or message.get("id") == request_id):
                return

    def request(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> RawReply:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id(), "method": method}
        if params is not None:
            message["params"] = params
        return self.post(message, **kw)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> RawReply:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return self.post(message)

    def initialize(self, *, protocol_version: str | None = None) -> RawReply:
        """initialize, then notifications/initialized; keeps the session id it was given."""
        reply = self.request(
            "initialize",
            {
                "protocolVersion": protocol_version or self.protocol_version,
                "capabilities": {},
                "clientInfo": {"name": "raw-test-client", "version": "0"},
            },
        )
        if reply.status == 200 and reply.response and "result" in reply.response:
            self.session_id = reply.headers.get("mcp-session-id")
            self.notify("notifications/initialized")
        return reply

    def call_tool(
        self, name: str, arguments: dict[str, Any], *, progress_token: Any = None, **kw: Any
    ) -> RawReply:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        return self.request("tools/call", params, **kw)

    def delete(self) -> httpx.Response:
        headers = self.headers()
        headers.pop("content-type")
        return self.http.delete(self.url, headers=headers)
