"""Against the fake server: session loss, dropped streams, timeouts, many threads on one session."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from errors import CallTimeout, ServerUnavailable, SessionExpired
from pipeline.mcp.batch import ToolCall
from pipeline.mcp.client import McpClient
from pipeline.mcp.lifecycle import LifecycleState
from pipeline.mcp.timeouts import CallTimeouts
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.support.mcp_clients import CONVERT, EXPORT, MakeClient

S = LifecycleState


def convert_and_export(client: McpClient, path: str) -> str:
    converted = client.call_tool(CONVERT, {"source": path})
    assert converted.structured is not None, converted.text
    exported = client.call_tool(EXPORT, {"document_key": converted.structured["document_key"]})
    assert exported.structured is not None, exported.text
    return str(exported.structured["markdown"])


# --- session loss --------------------------------------------------------------------------------


def test_a_restarted_server_is_reinitialized_transparently(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    old_session = client.session_id
    fake_server.restart()
    result = client.call_tool(CONVERT, {"source": docx})
    assert not result.is_error
    assert client.state is S.READY and client.session_id != old_session
    assert [t.to_state for t in client.trail] == [S.INITIALIZING, S.READY, S.REINITIALIZING,
                                                  S.READY]  # fmt: skip
    stats = fake_server.stats()  # the new process's counters
    assert stats["initialize_calls"] == 1
    assert stats["requests_by_method"]["tools/call"] == 2  # the 404'd one, then the resend


def test_forgotten_sessions_are_reinitialized(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    old_session = client.session_id
    assert fake_server.forget_sessions() == 1
    client.ping()
    assert client.session_id != old_session
    stats = fake_server.stats()
    assert stats["initialize_calls"] == 2
    assert stats["requests_by_method"]["ping"] == 2  # the forgotten session's, then the resend


def test_reinitialize_failure_is_E308_then_recovers(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.forget_sessions()
    fake_server.configure(fail_next=-1, fail_with="http503", fail_methods=["initialize"])
    with pytest.raises(SessionExpired) as caught:
        client.call_tool(CONVERT, {"source": docx})
    assert caught.value.code == "E308" and caught.value.retryable
    assert caught.value.detail["cause"]["http_status"] == 503
    assert client.state is S.REINITIALIZING
    fake_server.configure(fail_next=0)
    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    assert client.state is S.READY


# --- streams -------------------------------------------------------------------------------------


def test_a_dropped_stream_is_resumed_after_the_retry_delay(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(sse_retry_ms=300)  # session-scoped: before the client's session
    client = make_client()
    client.initialize()
    fake_server.configure(fail_next=1, fail_with="drop_stream")
    result = client.call_tool(CONVERT, {"source": docx})
    assert result.structured is not None and len(result.structured["document_key"]) == 32
    stats = fake_server.stats()
    assert stats["streams_dropped"] == 1
    assert len(stats["last_event_ids"]) == 1 and stats["last_event_ids"][0]
    # Never earlier than the server asked (the fake stamps the drop a hair after closing).
    assert stats["resume_delays_s"][0] >= 0.25
    assert stats["requests_by_method"]["tools/call"] == 1  # resumed, not resent


def test_without_retry_field_the_default_delay_is_used(
    make_client: MakeClient, fake_server: FakeServer, docx: str, settings: Any
) -> None:
    client = make_client(settings=settings.model_copy(update={"sse_retry_ms": 250}))
    client.initialize()
    fake_server.configure(fail_next=1, fail_with="drop_stream")
    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    assert fake_server.stats()["resume_delays_s"][0] >= 0.2


def test_a_dropped_stream_without_event_ids_is_E302(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(resumable=False)
    client = make_client()
    client.initialize()
    fake_server.configure(fail_next=1, fail_with="drop_stream")
    with pytest.raises(ServerUnavailable, match="no event id to resume from"):
        client.call_tool(CONVERT, {"source": docx})
    assert fake_server.stats()["last_event_ids"] == []


# --- timeouts -------------------------------------------------------------------------------------


def test_a_hanging_call_times_out_and_is_cancelled(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="hang")
    with pytest.raises(CallTimeout) as caught:
        client.call_tool(CONVERT, {"source": docx}, timeout=0.5)
    assert caught.value.code == "E303" and caught.value.retryable
    cancelled = wait_for(lambda: fake_server.stats()["cancelled"], timeout=10)
    assert len(cancelled) == 1 and isinstance(cancelled[0]["requestId"], int)
    assert "0.5s" in cancelled[0]["reason"]
    # The session is still good for the next call.
    assert not client.call_tool(CONVERT, {"source": docx}).is_error


def test_size_tiers_pick_the_timeout(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    client = make_client(timeouts=CallTimeouts(small_s=0.5, medium_s=30, large_s=30))
    client.initialize()
    fake_server.configure(fail_next=1, fail_with="hang")
    with pytest.raises(CallTimeout, match=r"0\.5s"):
        client.call_tool(CONVERT, {"source": docx}, size_bytes=1000)


# --- concurrency ----------------------------------------------------------------------------------


def test_many_threads_share_one_session(
    client: McpClient, fake_server: FakeServer, markdown_files: list[str]
) -> None:
    # Room for all sixteen documents: the real server's cache of ten would evict keys between
    # convert and export under this load (the profile's job, not the client's, to handle).
    fake_server.configure(delay_s=0.3, delay_tools=[CONVERT], cache_max_documents=32)
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            results[n] = convert_and_export(client, markdown_files[n])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(markdown_files))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for n, markdown in results.items():
        assert f"Document number {n}" in markdown
    assert len(results) == 16
    stats = fake_server.stats()
    assert stats["max_tool_calls_in_flight"] > 1
    assert len(stats["session_ids_seen"]) == 1
    assert stats["initialize_calls"] == 1


def test_batches_keep_request_order(
    client: McpClient, fake_server: FakeServer, markdown_files: list[str], tmp_path: Any
) -> None:
    calls = [ToolCall(CONVERT, {"source": path}) for path in markdown_files[:6]]
    calls.insert(3, ToolCall(CONVERT, {"source": str(tmp_path / "missing.md")}))
    calls.insert(5, ToolCall("no_such_tool", {}))
    for parallel in (False, True):
        outcomes = client.call_tools(calls, parallel=parallel)
        assert [o.call for o in outcomes] == calls
        assert [o.ok for o in outcomes] == [True, True, True, False, True, False, True, True]
        assert outcomes[3].result is not None and outcomes[3].result.is_error
        assert outcomes[5].error is not None and outcomes[5].error.code == "E304"
