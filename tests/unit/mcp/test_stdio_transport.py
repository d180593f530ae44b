"""The stdio transport against a real scripted child process: framing, routing, bounds, death.

The child (``stdio_child.py``) is a real process; nothing of it is mocked. Each request's method
picks what the child does (see its ``handle``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from errors import CallCancelled, CallTimeout, ReplyTooLarge, ServerUnavailable, SessionExpired
from pipeline.mcp._large_reply import FEED_BYTES, STREAM_AFTER
from pipeline.mcp._session import JsonRpcSession
from pipeline.mcp.protocol import JsonObject
from pipeline.mcp.stdio import StdioTransport
from pipeline.mcp.transport import Binding, Outgoing
from pipeline.mcp.watchdog import CancelScope
from tests.fixtures.processes import process_gone
from tests.fixtures.waiting import wait_for

CHILD = Path(__file__).with_name("stdio_child.py")


@pytest.fixture
def make_transport() -> Iterator[Any]:
    made: list[StdioTransport] = []

    def make(*extra: str, **options: Any) -> StdioTransport:
        transport = StdioTransport([sys.executable, str(CHILD), *extra], **options)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()


class Exchange:
    """One request through ``transport.post``: every message its sink was handed, in order."""

    def __init__(
        self,
        transport: StdioTransport,
        request_id: int,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float = 10.0,
        binding: Binding | None = None,
        cancel: CancelScope | None = None,
    ) -> None:
        self.messages: list[JsonObject] = []

        def sink(message: JsonObject) -> bool:
            self.messages.append(message)
            return message.get("id") == request_id and "method" not in message

        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        self.reply = transport.post(Outgoing(message, binding or Binding(), timeout, sink, cancel))

    @property
    def result(self) -> Any:
        return self.messages[-1]["result"]


def test_replies_are_routed_by_id_whatever_their_order(make_transport: Any) -> None:
    transport = make_transport()
    results: dict[str, Any] = {}
    slow = threading.Thread(
        target=lambda: results.update(slow=Exchange(transport, 1, "later", {"delay": 0.5}).result)
    )
    slow.start()
    wait_for(lambda: transport.child_pid, message="the child started")
    fast = Exchange(transport, 2, "echo", {"n": 2})
    assert fast.result["params"] == {"n": 2}
    assert "slow" not in results  # answered first, though sent second
    slow.join(10)
    assert results["slow"] == {"later": True}


def test_notifications_and_server_requests_reach_the_waiting_request(make_transport: Any) -> None:
    exchange = Exchange(make_transport(), 7, "chatty")
    kinds = [m.get("method", "response") for m in exchange.messages]
    assert kinds == ["notifications/message", "ping", "response"]
    assert exchange.reply.session_id is not None


def test_the_deadline_holds_while_the_child_keeps_sending(make_transport: Any) -> None:
    transport = make_transport()
    started = time.monotonic()
    with pytest.raises(CallTimeout):
        Exchange(transport, 1, "trickle", timeout=0.5)
    assert time.monotonic() - started < 1.5


def test_a_silent_child_times_out_and_the_session_sends_cancelled(make_transport: Any) -> None:
    transport = make_transport()
    session = JsonRpcSession(transport)
    binding = Binding(Exchange(transport, 99, "echo").reply.session_id)
    with pytest.raises(CallTimeout):
        session.exchange("silent", {}, timeout=0.3, binding=binding)
    seen = session.exchange("seen", {}, timeout=5, binding=binding).result
    assert seen["notifications"] == ["notifications/cancelled"]


def test_a_cancel_scope_ends_the_wait_at_once(make_transport: Any) -> None:
    transport = make_transport()
    scope = CancelScope()
    threading.Timer(0.2, scope.cancel, ("job cancelled",)).start()
    started = time.monotonic()
    with pytest.raises(CallCancelled, match="job cancelled"):
        Exchange(transport, 1, "silent", timeout=30, cancel=scope)
    assert time.monotonic() - started < 5


def test_an_oversized_reply_is_E312_and_the_stream_goes_on(make_transport: Any) -> None:
    transport = make_transport(max_reply_bytes=4096)
    with pytest.raises(ReplyTooLarge) as caught:
        Exchange(transport, 1, "big", {"size": 1_000_000})
    assert caught.value.detail == {"limit_bytes": 4096}
    pid = transport.child_pid
    assert Exchange(transport, 2, "echo").result["pid"] == pid  # same child, same stream


def test_a_long_line_parsed_as_it_arrives_gives_what_a_short_one_gives(
    make_transport: Any,
) -> None:
    transport = make_transport()
    for size in (1000, STREAM_AFTER + 2 * FEED_BYTES + 17):  # json.loads, then streamed
        assert Exchange(transport, size, "big", {"size": size}).result == {"filler": "x" * size}


def test_a_long_line_over_the_bound_is_E312_once_streamed_too(make_transport: Any) -> None:
    limit = STREAM_AFTER + FEED_BYTES  # past the point where the line is parsed as it arrives
    transport = make_transport(max_reply_bytes=limit)
    with pytest.raises(ReplyTooLarge) as caught:
        Exchange(transport, 1, "big", {"size": limit + FEED_BYTES})
    assert caught.value.detail == {"limit_bytes": limit}
    assert Exchange(transport, 2, "big", {"size": limit // 2}).result == {
        "filler": "x" * (limit // 2)
    }


@pytest.mark.parametrize("size", [100, STREAM_AFTER + FEED_BYTES])
def test_a_malformed_line_long_or_short_is_skipped_alike(
    make_transport: Any, caplog: pytest.LogCaptureFixture, size: int
) -> None:
    with caplog.at_level(logging.WARNING, logger="doclane.mcp.stdio"):
        assert Exchange(make_transport(), 1, "big_junk", {"size": size}).result == {
            "after_junk": True
        }
    assert any("non-JSON line" in record.getMessage() for record in caplog.records)


def test_an_oversized_notification_is_dropped_not_fatal(make_transport: Any) -> None:
    transport = make_transport(max_reply_bytes=4096)
    exchange = Exchange(transport, 1, "big_notification", {"size": 100_000})
    assert exchange.result == {"after_big_notification": True}


def test_a_line_that_is_not_json_is_skipped(make_transport: Any) -> None:
    assert Exchange(make_transport(), 1, "junk").result == {"after_junk": True}


def test_a_dying_child_fails_the_call_with_E302_and_its_last_words(make_transport: Any) -> None:
    transport = make_transport()
    binding = Binding(Exchange(transport, 1, "echo").reply.session_id)
    with pytest.raises(ServerUnavailable, match=r"exit code 3.*dying on request"):
        Exchange(transport, 2, "die", binding=binding)
    # The session belonged to that child: a request on it is told so, like an HTTP 404 ...
    with pytest.raises(SessionExpired):
        Exchange(transport, 3, "echo", binding=binding)
    # ... and the new handshake (no session yet) gets a fresh child.
    fresh = Exchange(transport, 4, "initialize")
    assert fresh.reply.session_id != binding.session_id
    assert fresh.result["pid"] == transport.child_pid


def test_a_second_handshake_gets_a_fresh_child(make_transport: Any) -> None:
    transport = make_transport()
    first = Exchange(transport, 1, "initialize").result["pid"]
    second = Exchange(transport, 2, "initialize").result["pid"]
    assert first != second
    wait_for(lambda: process_gone(first), timeout=10, message="the replaced child gone")


def test_close_escalates_to_sigkill_for_a_stubborn_child(make_transport: Any) -> None:
    transport = make_transport("--stubborn", grace_s=0.2)
    pid = Exchange(transport, 1, "echo").result["pid"]
    started = time.monotonic()
    transport.close()
    assert process_gone(pid)
    assert time.monotonic() - started >= 0.4  # stdin closed, grace, SIGTERM ignored, grace
    with pytest.raises(ServerUnavailable, match="closed"):
        Exchange(transport, 2, "echo")


def test_close_lets_a_well_behaved_child_exit_on_its_own(
    make_transport: Any, caplog: pytest.LogCaptureFixture
) -> None:
    transport = make_transport(grace_s=5)
    pid = Exchange(transport, 1, "echo").result["pid"]
    with caplog.at_level(logging.INFO, logger="doclane.mcp.stdio"):
        transport.close()
    assert process_gone(pid)
    assert "exit code 0" in caplog.text and "SIGTERM" not in caplog.text


def test_stderr_goes_to_the_log_bounded(
    make_transport: Any, caplog: pytest.LogCaptureFixture
) -> None:
    transport = make_transport()
    with caplog.at_level(logging.INFO, logger="doclane.mcp.stdio"):
        Exchange(transport, 1, "stderr_flood", {"lines": 2000, "width": 10_000})
        transport.close()
        wait_for(
            lambda: "not logged (rate limit)" in caplog.text, message="the rate limit reported"
        )
    child = [r for r in caplog.records if r.name == "doclane.mcp.stdio.child"]
    lines = [r for r in child if "flood" in r.getMessage()]
    assert 0 < len(lines) < 1000
    assert max(len(r.getMessage()) for r in lines) < 4096 + 200


def test_the_child_outlives_the_thread_that_started_it(make_transport: Any) -> None:
    """PR_SET_PDEATHSIG follows the forking *thread*: children are forked by a long-lived one."""
    transport = make_transport()
    box: dict[str, Any] = {}
    starter = threading.Thread(target=lambda: box.update(e=Exchange(transport, 1, "echo")))
    starter.start()
    starter.join(30)
    binding = Binding(box["e"].reply.session_id)
    assert Exchange(transport, 2, "echo", binding=binding).result["pid"] == box["e"].result["pid"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_parent_leaves_no_orphan_child(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, threading\n"
        "from pipeline.mcp.stdio import StdioTransport\n"
        "from pipeline.mcp.transport import Binding, Outgoing\n"
        f"t = StdioTransport([sys.executable, {str(CHILD)!r}, '--stubborn'])\n"
        "got = []\n"
        "t.post(Outgoing({'jsonrpc': '2.0', 'id': 1, 'method': 'echo'}, Binding(), 30,\n"
        "               sink=lambda m: got.append(m) or True))\n"
        "print(got[0]['result']['pid'], flush=True)\n"
        "threading.Event().wait()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[3],
    )
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert not process_gone(child_pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    wait_for(lambda: process_gone(child_pid), timeout=10, message="the orphaned child gone")
