"""A call's timeout is a deadline for the whole request, whatever the server sends meanwhile.

The fake server keeps replies alive the way an SDK server does (``: comment`` lines, events
without data, notifications), only every 0.2 s instead of 15 s, or trickles a body a byte at a
time. A client whose timeout restarts with every byte (httpx's read timeout alone) would wait
here until the server stopped: each test would hang until its outer limit. The bound each test
checks is thirty times the deadline, so it does not depend on the machine's speed; what it proves
is that the call ended because of its own deadline (E303, ``notifications/cancelled`` sent)
while the server was still sending.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from errors import CallTimeout
from pipeline.mcp.client import McpClient
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.support.mcp_clients import CONVERT, MakeClient

DEADLINE_S = 1.0
#: Far above the deadline: the old behaviour never ends; the right one ends near DEADLINE_S.
BOUND_S = 30 * DEADLINE_S


def timed_out_call(client: McpClient, docx: str) -> tuple[CallTimeout, float]:
    started = time.monotonic()
    with pytest.raises(CallTimeout) as caught:
        client.call_tool(CONVERT, {"source": docx}, timeout=DEADLINE_S)
    return caught.value, time.monotonic() - started


def assert_cancelled_on_server(fake_server: FakeServer) -> dict[str, Any]:
    cancelled = wait_for(lambda: fake_server.stats()["cancelled"], timeout=10)
    assert len(cancelled) == 1
    assert f"{DEADLINE_S:g}s" in cancelled[0]["reason"]
    return dict(cancelled[0])


@pytest.mark.parametrize(
    "kinds",
    [["comment"], ["empty_event"], ["notification"], ["comment", "empty_event", "notification"]],
)
def test_keep_alives_do_not_extend_a_hanging_call(
    client: McpClient, fake_server: FakeServer, docx: str, kinds: list[str]
) -> None:
    fake_server.configure(fail_next=1, fail_with="hang", keepalive_s=0.2, keepalive_kinds=kinds)
    error, elapsed = timed_out_call(client, docx)
    assert error.code == "E303" and error.trips_breaker
    assert f"{DEADLINE_S:g}s" in error.message
    assert elapsed < BOUND_S
    assert_cancelled_on_server(fake_server)
    assert fake_server.stats()["keepalives_sent"] >= 1  # the server was still talking
    # The connection the alarm cut is gone; the session is still good for the next call.
    fake_server.configure(keepalive_s=None)
    assert not client.call_tool(CONVERT, {"source": docx}).is_error


def test_a_trickled_json_body_ends_at_the_deadline(
    make_client: MakeClient, fake_server_factory: Any, docx: str
) -> None:
    server = fake_server_factory(json_response=True)
    client = make_client(server.url)
    client.initialize()
    # The reply is a few hundred bytes: at 0.3 s a byte it would take a minute or more.
    server.configure(trickle_s=0.3)
    error, elapsed = timed_out_call(client, docx)
    assert error.code == "E303"
    assert elapsed < BOUND_S
    assert server.stats()["trickled_bytes"] >= 1
    assert_cancelled_on_server(server)


def test_a_trickled_sse_reply_ends_at_the_deadline(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(trickle_s=0.3)
    error, elapsed = timed_out_call(client, docx)
    assert error.code == "E303"
    assert elapsed < BOUND_S
    assert fake_server.stats()["trickled_bytes"] >= 1


def test_a_resumed_stream_kept_alive_ends_at_the_deadline(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    """The POST stream drops after its priming event; the GET that resumes it is kept alive."""
    fake_server.configure(
        sse_retry_ms=50,
        fail_next=1,
        fail_with="drop_stream",
        delay_s=20,
        delay_tools=[CONVERT],
        keepalive_s=0.2,
        shape_methods=["GET"],
    )
    client = make_client()
    client.initialize()
    error, elapsed = timed_out_call(client, docx)
    assert error.code == "E303"
    assert elapsed < BOUND_S
    stats = fake_server.stats()
    assert stats["last_event_ids"], "the client never resumed the dropped stream"
    assert stats["keepalives_sent"] >= 1


def test_protocol_requests_have_deadlines_too(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    """ping (like initialize and tools/list) gets ``request_s`` as a whole-request deadline."""
    from pipeline.mcp.timeouts import CallTimeouts

    client = make_client(timeouts=CallTimeouts(request_s=DEADLINE_S))
    client.initialize()
    fake_server.configure(trickle_s=0.3, shape_methods=["ping"])
    started = time.monotonic()
    with pytest.raises(CallTimeout):
        client.ping()
    assert time.monotonic() - started < BOUND_S
    assert fake_server.stats()["trickled_bytes"] >= 1
