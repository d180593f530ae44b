"""The fake's reply shapes and stream knobs: JSON vs SSE, drop and resume, hang, delay,
notifications before the result, server-to-client requests, pagination."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.fixtures.fake_server import FakeServer, FakeServerFactory
from tests.fixtures.waiting import wait_for
from tests.support.raw_mcp import RawSession

CONVERT = "convert_document_into_docling_document"


def new_session(server: FakeServer, **options: Any) -> RawSession:
    raw = RawSession(server.url, **options)
    assert raw.initialize().status == 200
    return raw


# --- JSON or SSE ---------------------------------------------------------------------------


def test_sse_replies_start_with_a_priming_event(session: RawSession, sample: str) -> None:
    reply = session.call_tool(CONVERT, {"source": sample})
    assert reply.content_type == "text/event-stream"
    priming, answer = reply.events
    assert priming.id and priming.data == "" and priming.retry is None
    assert answer.event == "message" and answer.id and json.loads(answer.data)["id"] == 2


def test_resumable_off_and_retry_field(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(resumable=False)
    with new_session(fake_server) as plain:
        reply = plain.call_tool(CONVERT, {"source": sample})
        assert [event.id for event in reply.events] == [""] and reply.response
    fake_server.configure(resumable=True, sse_retry_ms=250)
    with new_session(fake_server) as retrying:
        assert retrying.call_tool(CONVERT, {"source": sample}).events[0].retry == 250


def test_json_response_knob_applies_to_new_sessions(fake_server: FakeServer, sample: str) -> None:
    with new_session(fake_server) as before:
        fake_server.configure(json_response=True)
        with new_session(fake_server) as after:
            reply = after.call_tool(CONVERT, {"source": sample})
            assert reply.content_type == "application/json"
            assert reply.result["structuredContent"]["from_cache"] is False
            assert after.request("tools/list").content_type == "application/json"
        assert before.call_tool(CONVERT, {"source": sample}).content_type == "text/event-stream"


def test_json_response_start_flag_survives_reset(
    fake_server_factory: FakeServerFactory, sample: str
) -> None:
    server = fake_server_factory(json_response=True)
    server.reset()
    assert server.knobs()["json_response"] is True
    with new_session(server) as raw:
        assert raw.call_tool(CONVERT, {"source": sample}).content_type == "application/json"

    async def through_sdk(client: Client) -> bool:
        return (await client.call_tool(CONVERT, {"source": sample})).is_error

    assert _sdk(server.url, through_sdk) is False


def _sdk(url: str, action: Any, **options: Any) -> Any:
    async def main() -> Any:
        async with Client(url, mode="legacy", **options) as client:
            return await action(client)

    return anyio.run(main)


# --- drop the stream, resume it -----------------------------------------------------------


def test_drop_stream_then_resume_with_last_event_id(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(fail_next=1, fail_with="drop_stream", sse_retry_ms=100)
    with new_session(fake_server) as raw:
        dropped = raw.call_tool(CONVERT, {"source": sample})
        assert dropped.status == 200 and dropped.response is None
        [priming] = dropped.events
        assert priming.id and priming.retry == 100 and priming.data == ""
        resumed = raw.resume(priming.id)
        assert resumed.status == 200
        assert resumed.result["structuredContent"]["from_cache"] is False
        assert resumed.response_id == raw.last_id
    stats = fake_server.stats()
    assert stats["streams_dropped"] == 1 and stats["last_event_ids"] == [priming.id]
    assert stats["last_headers_by_method"]["GET"]["last-event-id"] == priming.id
    assert len(stats["resume_delays_s"]) == 1


def test_resume_waits_for_a_response_the_tool_has_not_produced_yet(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="drop_stream", delay_s=3.0)
    with new_session(fake_server) as raw:
        dropped = raw.call_tool(CONVERT, {"source": sample})
        wait_for(lambda: fake_server.stats()["tool_calls_in_flight"] == 1, message="tool running")
        resumed = raw.resume(dropped.event_ids[-1])
        assert resumed.result["isError"] is False


def test_drop_stream_on_two_sessions_with_the_same_request_ids(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    sources = []
    for name in ("one", "two"):
        sources.append(tmp_path / f"{name}.md")
        sources[-1].write_text(f"# {name}\n")
    fake_server.configure(fail_next=2, fail_with="drop_stream")
    with new_session(fake_server) as first, new_session(fake_server) as second:
        drops = [raw.call_tool(CONVERT, {"source": str(src)})
                 for raw, src in ((first, sources[0]), (second, sources[1]))]  # fmt: skip
        assert drops[0].response is None and drops[1].response is None
        keys = [raw.resume(drop.event_ids[-1]).result["structuredContent"]["document_key"]
                for raw, drop in ((second, drops[1]), (first, drops[0]))]  # fmt: skip
    assert keys[0] != keys[1]
    assert fake_server.stats()["cached_documents"] == [keys[1], keys[0]]


def test_drop_stream_can_target_the_handshake_and_the_listing(fake_server: FakeServer) -> None:
    fake_server.configure(fail_next=1, fail_with="drop_stream", fail_methods=["initialize"])
    with RawSession(fake_server.url) as raw:
        dropped = raw.initialize()
        assert dropped.response is None and dropped.event_ids
        raw.session_id = dropped.headers["mcp-session-id"]
        resumed = raw.resume(dropped.event_ids[-1])
        assert resumed.result["serverInfo"]["name"] == "docling"
        raw.notify("notifications/initialized")
        fake_server.configure(fail_next=1, fail_methods=["tools/list"])
        dropped = raw.request("tools/list")
        assert dropped.response is None
        assert len(raw.resume(dropped.event_ids[-1]).result["tools"]) == 21
    assert fake_server.stats()["streams_dropped"] == 2


def test_sdk_client_resumes_a_dropped_stream(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(fail_next=1, fail_with="drop_stream", sse_retry_ms=50)

    async def call(client: Client) -> Any:
        return await client.call_tool(CONVERT, {"source": sample})

    result = _sdk(fake_server.url, call)
    assert result.is_error is False and result.structured_content["from_cache"] is False
    stats = fake_server.stats()
    assert stats["streams_dropped"] == 1 and len(stats["last_event_ids"]) == 1


def test_drop_stream_without_resumability_ends_the_stream_with_nothing(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(resumable=False, fail_next=2, fail_with="drop_stream")
    with new_session(fake_server) as raw:
        reply = raw.call_tool(CONVERT, {"source": sample})
        assert reply.status == 200 and reply.events == [] and reply.response is None
    fake_server.configure(json_response=True)
    with new_session(fake_server) as raw:
        reply = raw.call_tool(CONVERT, {"source": sample})
        assert reply.content_type == "text/event-stream" and reply.events == []
    assert fake_server.stats()["streams_dropped"] == 2


def test_drop_stream_on_old_protocol_versions_cannot_be_resumed(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="drop_stream")
    with new_session(fake_server, protocol_version="2025-06-18") as raw:
        reply = raw.call_tool(CONVERT, {"source": sample})
        assert reply.events == [] and reply.response is None


# --- hang and delay ------------------------------------------------------------------------


def test_hang_never_answers_until_reset(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(fail_next=1, fail_with="hang")
    with new_session(fake_server) as raw:
        with pytest.raises(httpx.ReadTimeout):
            raw.call_tool(CONVERT, {"source": sample}, timeout=1.0)
        assert fake_server.stats()["faults_injected"][0]["fault"] == "hang"
        fake_server.reset()
        assert raw.call_tool(CONVERT, {"source": sample}).result["isError"] is False


def test_sdk_client_timeout_on_a_hung_call_sends_cancelled(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="hang")

    async def call(client: Client) -> MCPError | None:
        try:
            await client.call_tool(CONVERT, {"source": sample}, read_timeout_seconds=0.5)
        except MCPError as exc:
            return exc
        return None

    timed_out = _sdk(fake_server.url, call)
    assert isinstance(timed_out, MCPError) and timed_out.code == -32001
    cancelled = wait_for(lambda: fake_server.stats()["cancelled"], message="cancel recorded")
    assert cancelled[0]["requestId"] is not None


def test_delay_slows_tool_calls_inside_the_server(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(delay_s=3.0, delay_tools=[CONVERT])
    with new_session(fake_server) as raw, ThreadPoolExecutor(max_workers=2) as pool:
        started = time.monotonic()
        slow = pool.submit(raw.call_tool, CONVERT, {"source": sample})
        wait_for(lambda: fake_server.stats()["tool_calls_in_flight"] == 1, message="call running")
        fast = raw.call_tool("list_cached_documents", {})  # not in delay_tools: not slowed
        assert fast.result["isError"] is False
        assert fake_server.stats()["tool_calls_in_flight"] == 1  # the slow one still sleeps
        assert slow.result(timeout=30).result["isError"] is False
        assert time.monotonic() - started >= 3.0


def test_concurrent_calls_on_one_session_are_served_together(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(delay_s=3.0)
    with new_session(fake_server) as raw, ThreadPoolExecutor(max_workers=3) as pool:
        calls = [pool.submit(raw.call_tool, CONVERT, {"source": sample}) for _ in range(3)]
        wait_for(lambda: fake_server.stats()["tool_calls_in_flight"] == 3, message="3 in flight")
        replies = [call.result(timeout=30) for call in calls]
    assert sorted(reply.response_id for reply in replies) == [2, 3, 4]
    assert fake_server.stats()["max_tool_calls_in_flight"] == 3


def test_max_concurrent_calls_lets_the_others_wait_their_turn(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(delay_s=2.0, max_concurrent_calls=2)
    with new_session(fake_server) as raw, ThreadPoolExecutor(max_workers=3) as pool:
        calls = [pool.submit(raw.call_tool, CONVERT, {"source": sample}) for _ in range(3)]
        wait_for(
            lambda: fake_server.stats()["tool_calls_in_flight"] == 3, message="3 calls arrived"
        )
        assert fake_server.stats()["tool_calls_working"] == 2  # the third waits for a slot
        replies = [call.result(timeout=30) for call in calls]
    assert all(reply.result["isError"] is False for reply in replies)
    stats = fake_server.stats()
    assert (stats["max_tool_calls_in_flight"], stats["max_tool_calls_working"]) == (3, 2)


# --- messages before the result ------------------------------------------------------------


def test_progress_logging_and_list_changed_come_before_the_result(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(emit_progress=True, emit_logging=True, emit_list_changed=True)
    with new_session(fake_server) as raw:
        reply = raw.call_tool(CONVERT, {"source": sample}, progress_token="tok-1")
        plain = raw.call_tool(CONVERT, {"source": sample})
    methods = [m.get("method", "(response)") for m in reply.messages]
    assert methods == ["notifications/progress"] * 3 + [
        "notifications/message", "notifications/tools/list_changed", "(response)",
    ]  # fmt: skip
    progress = [m["params"] for m in reply.messages[:3]]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("tok-1", 1, 3), ("tok-1", 2, 3), ("tok-1", 3, 3),
    ]  # fmt: skip
    assert "notifications/progress" not in [m.get("method") for m in plain.messages]
    stats = fake_server.stats()
    sent = (stats["progress_sent"], stats["log_messages_sent"], stats["list_changed_sent"])
    assert sent == (3, 2, 2)


def test_list_changed_knob_declares_the_capability(fake_server: FakeServer) -> None:
    fake_server.configure(emit_list_changed=True)
    with RawSession(fake_server.url) as raw:
        assert raw.initialize().result["capabilities"]["tools"] == {"listChanged": True}


def test_sdk_client_receives_the_notifications(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(emit_progress=True, emit_logging=True, emit_list_changed=True)
    progress_values: list[float] = []
    logs: list[Any] = []
    messages: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progress_values.append(progress)

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def on_message(message: Any) -> None:
        messages.append(message)

    async def call(client: Client) -> Any:
        return await client.call_tool(CONVERT, {"source": sample}, progress_callback=on_progress)

    result = _sdk(fake_server.url, call, logging_callback=on_log, message_handler=on_message)
    assert result.is_error is False
    assert progress_values == [1, 2, 3]
    assert logs[0].data["event"] == "tool call" and logs[0].logger == "fake-docling"
    assert any("ToolListChanged" in type(m).__name__ for m in messages)


# --- server-to-client requests -------------------------------------------------------------


def test_server_ping_records_the_clients_answer(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(server_ping=True)
    asked: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"jsonrpc": "2.0", "id": request["id"], "result": {}}

    with new_session(fake_server) as raw:
        reply = raw.call_tool(CONVERT, {"source": sample}, answer=answer)
    assert [request["method"] for request in asked] == ["ping"]
    assert reply.result["isError"] is False
    stats = fake_server.stats()
    assert stats["server_request_answers"] == [
        {"method": "ping", "outcome": "result", "result": {}}
    ]
    assert stats["client_responses"] == [{"id": asked[0]["id"], "result": {}}]


def test_server_ping_without_an_answer_times_out(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(server_ping=True, server_request_timeout_s=0.5)
    with new_session(fake_server) as raw:
        reply = raw.call_tool(CONVERT, {"source": sample}, answer=lambda request: None)
    assert reply.result["isError"] is False
    assert fake_server.stats()["server_request_answers"] == [
        {"method": "ping", "outcome": "timeout"}
    ]


def test_sdk_client_answers_server_ping(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(server_ping=True)

    async def call(client: Client) -> Any:
        return await client.call_tool(CONVERT, {"source": sample})

    assert _sdk(fake_server.url, call).is_error is False
    answers = fake_server.stats()["server_request_answers"]
    assert answers == [{"method": "ping", "outcome": "result", "result": {}}]


def test_server_request_method_records_a_refusal(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(server_request_method="sampling/createMessage")

    def refuse(request: dict[str, Any]) -> dict[str, Any]:
        assert request["params"]["maxTokens"] == 16
        error = {"code": -32601, "message": "Method not found"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}

    with new_session(fake_server) as raw:
        assert raw.call_tool(CONVERT, {"source": sample}, answer=refuse).result["isError"] is False
    answers = fake_server.stats()["server_request_answers"]
    assert answers == [
        {"method": "sampling/createMessage", "outcome": "error",
         "error": {"code": -32601, "message": "Method not found"}},
    ]  # fmt: skip


def test_server_requests_have_no_back_channel_in_json_mode(
    fake_server: FakeServer, sample: str
) -> None:
    fake_server.configure(json_response=True, server_ping=True)
    with new_session(fake_server) as raw:
        assert raw.call_tool(CONVERT, {"source": sample}).result["isError"] is False
    answers = fake_server.stats()["server_request_answers"]
    assert answers == [{"method": "ping", "outcome": "no_back_channel"}]


# --- pagination ----------------------------------------------------------------------------


def test_tools_list_pages_follow_next_cursor(fake_server: FakeServer, session: RawSession) -> None:
    everything = session.request("tools/list").result["tools"]
    fake_server.configure(tools_page_size=5)
    pages, cursor = [], None
    while True:
        result = session.request("tools/list", {"cursor": cursor} if cursor else {}).result
        pages.append(result["tools"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert [len(page) for page in pages] == [5, 5, 5, 5, 1]
    assert [tool for page in pages for tool in page] == everything
    error = session.request("tools/list", {"cursor": "bogus"}).error
    assert error["code"] == -32602


def test_sdk_client_pages_through_the_tools(fake_server: FakeServer) -> None:
    fake_server.configure(tools_page_size=8)

    async def pages(client: Client) -> list[int]:
        sizes, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor)
            sizes.append(len(page.tools))
            cursor = page.next_cursor
            if cursor is None:
                return sizes

    assert _sdk(fake_server.url, pages) == [8, 8, 5]
    assert fake_server.stats()["requests_by_method"]["tools/list"] == 3


def test_threads_share_nothing_but_the_server(fake_server: FakeServer, sample: str) -> None:
    """Several raw sessions from threads at once: every call answered, counted once."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with new_session(fake_server) as raw:
                for _ in range(5):
                    assert raw.call_tool(CONVERT, {"source": sample}).result["isError"] is False
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert fake_server.stats()["requests_by_tool"][CONVERT] == 20
