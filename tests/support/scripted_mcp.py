"""A scripted MCP server behind the client's transport protocol: unit tests need no sockets.

It speaks the session's side of the contract exactly as ``StreamableHttpTransport`` does: one
``post`` per message, every reply message handed to the sink in order until the sink is
satisfied, catalog errors raised for what HTTP would have said (404 for a forgotten session,
a timeout). What a test wants to go wrong is set on its attributes; every post is recorded
with its binding and timeout so tests can assert on what went over the "wire".
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from errors import CallTimeout, PipelineError, SessionExpired
from pipeline.mcp.client import McpClient
from pipeline.mcp.transport import Binding, MessageSink, Outgoing, Reply

#: The client factory the MCP client's unit tests share (their conftest), against this server.
MakeClient = Callable[..., McpClient]

JsonObject = dict[str, Any]
#: A tool implementation: (name, arguments, request) -> the messages to deliver, response last.
ToolScript = Callable[[str, JsonObject, JsonObject], list[JsonObject]]


def text_result(
    text: str, structured: JsonObject | None = None, is_error: bool = False
) -> JsonObject:
    result: JsonObject = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def response(request_id: Any, result: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error(request_id: Any, code: int, message: str) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


ECHO_TOOL: JsonObject = {
    "name": "echo",
    "description": "Echo the text back.\nSecond line.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
        "required": ["text"],
    },
    "outputSchema": {
        "type": "object",
        "properties": {"echo": {"type": "string"}},
        "required": ["echo"],
    },
}
PLAIN_TOOL: JsonObject = {"name": "plain", "inputSchema": {"type": "object"}}


def echo_tool(name: str, arguments: JsonObject, request: JsonObject) -> list[JsonObject]:
    text = str(arguments.get("text", "")) * int(arguments.get("times", 1))
    return [response(request["id"], text_result(text, {"echo": text}))]


@dataclass
class Post:
    message: JsonObject
    binding: Binding
    timeout: float


class ScriptedServer:
    """Implements ``pipeline.mcp.transport.Transport``; see the module docstring."""

    endpoint = "http://scripted.test:8765/mcp"

    def __init__(self, tools: list[JsonObject] | None = None) -> None:
        self.tools: list[JsonObject] = list(tools if tools is not None else [ECHO_TOOL, PLAIN_TOOL])
        self.scripts: dict[str, ToolScript] = {"echo": echo_tool, "plain": self._plain}
        self.protocol_answer: str | None = None  # None: echo the client's version
        self.capabilities: JsonObject = {"tools": {"listChanged": True}}
        self.page_size: int | None = None
        self.issue_sessions = True
        #: Raised instead of answering ``initialize`` (one per attempt, popped from the front).
        self.initialize_failures: list[PipelineError] = []
        #: Messages delivered before every tools/call response (notifications, server requests).
        self.before_response: list[JsonObject] = []
        #: Messages delivered before the response to a method (e.g. tools/list), every time.
        self.notify_during: dict[str, list[JsonObject]] = {}
        self.posts: list[Post] = []
        self.deletes: list[Binding] = []
        self.closed = False
        self.live_sessions: set[str] = set()
        self._session_numbers = itertools.count(1)
        self._lock = threading.Lock()

    # --- controls ------------------------------------------------------------------------------

    def forget_sessions(self) -> None:
        """Like a restart: every session id the server gave is now answered with HTTP 404."""
        with self._lock:
            self.live_sessions.clear()

    def sent(self, method: str) -> list[Post]:
        with self._lock:
            return [p for p in self.posts if p.message.get("method") == method]

    def answers(self) -> list[JsonObject]:
        """Responses the client POSTed to server requests."""
        with self._lock:
            return [p.message for p in self.posts if "method" not in p.message]

    # --- the transport protocol ------------------------------------------------------------------

    def post(self, outgoing: Outgoing) -> Reply:
        message, binding, sink = outgoing.message, outgoing.binding, outgoing.sink
        with self._lock:
            self.posts.append(Post(message, binding, outgoing.timeout))
            session_known = binding.session_id is None or binding.session_id in self.live_sessions
        method = message.get("method")
        if not session_known and method != "initialize":
            raise SessionExpired("HTTP 404: session not found", http_status=404)
        if method is None or "id" not in message:
            return Reply(202)
        if method == "initialize":
            return self._initialize(message, sink)
        for item in self._answer(method, message):
            if sink(item):
                break
        return Reply(200)

    def delete(self, binding: Binding) -> None:
        with self._lock:
            self.deletes.append(binding)
            if binding.session_id:
                self.live_sessions.discard(binding.session_id)

    def close(self) -> None:
        self.closed = True

    # --- the server side -----------------------------------------------------------------------

    def _initialize(self, message: JsonObject, sink: MessageSink) -> Reply:
        with self._lock:
            failure = self.initialize_failures.pop(0) if self.initialize_failures else None
        if failure is not None:
            raise failure
        asked = message["params"]["protocolVersion"]
        session_id = None
        if self.issue_sessions:
            session_id = f"sid-{next(self._session_numbers)}"
            with self._lock:
                self.live_sessions.add(session_id)
        result = {
            "protocolVersion": self.protocol_answer or asked,
            "capabilities": self.capabilities,
            "serverInfo": {"name": "scripted", "version": "1.0"},
        }
        sink(response(message["id"], result))
        return Reply(200, session_id)

    def _answer(self, method: str, message: JsonObject) -> list[JsonObject]:
        request_id = message["id"]
        params = message.get("params") or {}
        if method == "tools/list":
            page = response(request_id, self._tools_page(params.get("cursor")))
            return [*self.notify_during.get(method, []), page]
        if method == "ping":
            return [response(request_id, {})]
        if method == "tools/call":
            script = self.scripts.get(params["name"])
            if script is None:
                return [
                    response(
                        request_id, text_result(f"Unknown tool: {params['name']}", is_error=True)
                    )
                ]
            return [*self.before_response, *script(params["name"], params["arguments"], message)]
        return [error(request_id, -32601, "Method not found")]

    def _tools_page(self, cursor: str | None) -> JsonObject:
        if self.page_size is None:
            return {"tools": self.tools}
        start = int(cursor or 0)
        page: JsonObject = {"tools": self.tools[start : start + self.page_size]}
        if start + self.page_size < len(self.tools):
            page["nextCursor"] = str(start + self.page_size)
        return page

    @staticmethod
    def _plain(name: str, arguments: JsonObject, request: JsonObject) -> list[JsonObject]:
        return [response(request["id"], text_result("plain"))]


def timing_out(name: str, arguments: JsonObject, request: JsonObject) -> list[JsonObject]:
    """A tool script whose call never answers in time (what the HTTP transport raises)."""
    raise CallTimeout(f"tools/call {name}: no answer within the deadline")
