"""The JSON-RPC session: ids, correlation by id, server requests, notifications, cancellation."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from errors import (
    CallTimeout,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    ServerUnavailable,
    UnknownJsonRpcError,
)
from pipeline.mcp._session import JsonRpcSession
from pipeline.mcp.client import McpClient
from pipeline.mcp.protocol import LogMessage, Progress
from pipeline.mcp.transport import Binding, Outgoing, Reply
from tests.support.scripted_mcp import (
    JsonObject,
    MakeClient,
    ScriptedServer,
    error,
    response,
    text_result,
    timing_out,
)


class OneShotTransport:
    """Delivers a fixed list of messages (ids filled in from the request) to the sink."""

    endpoint = "http://one-shot.test/mcp"

    def __init__(self, *replies: Any) -> None:
        self.replies = replies
        self.posts: list[JsonObject] = []

    def post(self, outgoing: Outgoing) -> Reply:
        message, sink = outgoing.message, outgoing.sink
        self.posts.append(message)
        if "id" not in message or "method" not in message:
            return Reply(202)
        for reply in self.replies:
            item = reply(message["id"]) if callable(reply) else reply
            if sink(item):
                break
        return Reply(200)

    def delete(self, binding: Binding) -> None:
        pass

    def close(self) -> None:
        pass


def test_ids_are_unique_across_threads() -> None:
    session = JsonRpcSession(OneShotTransport())
    ids: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        mine = [session.next_id() for _ in range(500)]
        with lock:
            ids.extend(mine)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 4000 and len(set(ids)) == 4000


def test_concurrent_calls_get_their_own_results(client: McpClient, server: ScriptedServer) -> None:
    results: dict[int, str] = {}

    def call(n: int) -> None:
        results[n] = client.call_tool("echo", {"text": f"call-{n}"}).text

    threads = [threading.Thread(target=call, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: f"call-{n}" for n in range(32)}
    call_ids = [p.message["id"] for p in server.sent("tools/call")]
    assert len(set(call_ids)) == 32


def test_a_response_for_another_request_reaches_its_owner() -> None:
    """Correlation is by id: a stream may carry another in-flight request's response."""
    first_sink_ready = threading.Event()
    release_first = threading.Event()

    class CrossTransport(OneShotTransport):
        def post(self, outgoing: Outgoing) -> Reply:
            message, sink = outgoing.message, outgoing.sink
            if message["params"].get("which") == "first":
                first_sink_ready.set()
                release_first.wait(5)
                return Reply(200)  # its response went out on the second request's stream
            first_id = message["id"] - 1
            sink(response(first_id, {"for": "first"}))
            sink(response(message["id"], {"for": "second"}))
            release_first.set()
            return Reply(200)

    session = JsonRpcSession(CrossTransport())
    got: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: got.update(
            first=session.exchange("x", {"which": "first"}, timeout=5, binding=Binding()).result
        )
    )
    first.start()
    assert first_sink_ready.wait(5)
    got["second"] = session.exchange("x", {"which": "second"}, timeout=5, binding=Binding()).result
    first.join(5)
    assert got == {"first": {"for": "first"}, "second": {"for": "second"}}
    assert session.in_flight == 0


def test_responses_to_unknown_ids_are_dropped_not_misdelivered() -> None:
    session = JsonRpcSession(
        OneShotTransport(response(999, {"stray": True}), lambda i: response(i, {"mine": True}))
    )
    assert session.exchange("x", {}, timeout=5, binding=Binding()).result == {"mine": True}


def test_an_error_without_id_is_the_answer_to_this_request() -> None:
    session = JsonRpcSession(OneShotTransport(error(None, -32700, "Parse error")))
    with pytest.raises(ParseError, match="Parse error"):
        session.exchange("x", {}, timeout=5, binding=Binding())


@pytest.mark.parametrize(
    ("code", "expected", "catalog"),
    [
        (-32700, ParseError, "E200"),
        (-32600, InvalidRequest, "E201"),
        (-32601, MethodNotFound, "E202"),
        (-32602, InvalidParams, "E203"),
        (-32603, InternalError, "E204"),
        (-32000, ServerUnavailable, "E302"),
        (-32001, CallTimeout, "E303"),
        (-32099, UnknownJsonRpcError, "E299"),
    ],
)
def test_jsonrpc_errors_become_catalog_errors(
    code: int, expected: type[Exception], catalog: str
) -> None:
    session = JsonRpcSession(OneShotTransport(lambda i: error(i, code, "the server said no")))
    with pytest.raises(expected) as caught:
        session.exchange("tools/call", {}, timeout=5, binding=Binding())
    assert caught.value.code == catalog  # type: ignore[attr-defined]
    assert caught.value.jsonrpc_code == code  # type: ignore[attr-defined]
    assert "the server said no" in str(caught.value)


@pytest.mark.parametrize(
    "reply",
    [
        {"jsonrpc": "2.0", "no": "method or id"},
        lambda i: {"jsonrpc": "2.0", "id": i, "result": ["not", "an", "object"]},
        lambda i: {"jsonrpc": "2.0", "id": i, "error": "not an object"},
    ],
)
def test_malformed_messages_are_E200(reply: Any) -> None:
    session = JsonRpcSession(OneShotTransport(reply))
    with pytest.raises(ParseError):
        session.exchange("x", {}, timeout=5, binding=Binding())


def test_a_reply_without_the_response_is_E200() -> None:
    session = JsonRpcSession(OneShotTransport())
    with pytest.raises(ParseError, match="carried no response"):
        session.exchange("x", {}, timeout=5, binding=Binding())


def test_server_ping_is_answered_and_other_requests_refused(
    client: McpClient, server: ScriptedServer
) -> None:
    server.before_response = [
        {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"},
        {"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage", "params": {}},
    ]
    assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    answers = server.answers()
    assert answers == [
        {"jsonrpc": "2.0", "id": "srv-1", "result": {}},
        {
            "jsonrpc": "2.0",
            "id": "srv-2",
            "error": {"code": -32601, "message": "Method not found: sampling/createMessage"},
        },
    ]
    answer_posts = [p for p in server.posts if "method" not in p.message]
    assert all(p.binding.session_id == "sid-1" for p in answer_posts)


def test_notifications_reach_the_listeners(make_client: MakeClient, server: ScriptedServer) -> None:
    progress: list[Progress] = []
    logs: list[LogMessage] = []
    seen: list[str] = []
    client = make_client(
        on_progress=progress.append,
        on_log=logs.append,
        on_notification=lambda method, params: seen.append(method),
    )
    client.initialize()
    server.before_response = [
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": "t", "progress": 1, "total": 2, "message": "half"}},
        {"jsonrpc": "2.0", "method": "notifications/message",
         "params": {"level": "info", "logger": "docling", "data": {"step": "layout"}}},
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {}},
    ]  # fmt: skip
    client.call_tool("echo", {"text": "x"})
    assert progress == [Progress(token="t", progress=1.0, total=2.0, message="half")]
    assert logs == [LogMessage(level="info", data={"step": "layout"}, logger="docling")]
    assert seen == [
        "notifications/progress",
        "notifications/message",
        "notifications/resources/updated",
    ]
    # A progress listener makes the client ask for progress.
    meta = server.sent("tools/call")[-1].message["params"]["_meta"]
    assert isinstance(meta["progressToken"], str)


def test_a_failing_listener_does_not_fail_the_call(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    def explode(_: Progress) -> None:
        raise RuntimeError("listener bug")

    client = make_client(on_progress=explode)
    client.initialize()
    server.before_response = [
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": "t", "progress": 1}},
    ]  # fmt: skip
    assert client.call_tool("echo", {"text": "ok"}).text == "ok"


def test_without_a_progress_listener_no_token_is_sent(
    client: McpClient, server: ScriptedServer
) -> None:
    client.call_tool("echo", {"text": "x"})
    assert "_meta" not in server.sent("tools/call")[-1].message["params"]


def test_a_timed_out_call_is_cancelled_by_id(client: McpClient, server: ScriptedServer) -> None:
    server.scripts["echo"] = timing_out
    with pytest.raises(CallTimeout):
        client.call_tool("echo", {"text": "slow"}, timeout=1.5)
    call = server.sent("tools/call")[-1]
    assert call.timeout == 1.5
    cancel = server.sent("notifications/cancelled")
    assert len(cancel) == 1
    assert cancel[0].message["params"]["requestId"] == call.message["id"]
    assert "1.5s" in cancel[0].message["params"]["reason"]
    assert cancel[0].binding == call.binding


def test_tool_errors_are_results_not_exceptions(client: McpClient, server: ScriptedServer) -> None:
    server.scripts["plain"] = lambda name, args, request: [
        response(request["id"], text_result("Error executing tool plain", is_error=True))
    ]
    result = client.call_tool("plain", {})
    assert result.is_error and result.text == "Error executing tool plain"
    assert result.raw["isError"] is True
