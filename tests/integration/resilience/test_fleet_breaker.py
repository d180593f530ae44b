"""The breaker shared by a fleet through Redis, and the pool, against the fake server's faults.

Every doclane process here is a real process (``doclane mcp call``), so the state they share
is really shared through Redis, as on a fleet of hosts.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.mcp.client import McpClient
from pipeline.resilience.facade import build_resilient
from pipeline.resilience.retry import RetryRecord
from pipeline.settings.tree import read_settings
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
DOCX = str(ROOT / "examples" / "quarterly-report.docx")
CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


def doclane_call(server: FakeServer, **env: str) -> dict[str, Any]:
    """One ``doclane mcp call --json`` in its own process; its one JSON line."""
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "mcp", "call", CONVERT,
         "--args", json.dumps({"source": DOCX}), "--origin", server.url, "--json"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    assert (proc.returncode == 0) == lines[0]["ok"]
    return lines[0]


def requests_seen(server: FakeServer) -> int:
    return sum(server.stats()["http_requests_by_verb"].values())


def breaker_of(server: FakeServer, **settings: Any) -> Any:
    resilient = build_resilient(
        read_settings().mcp, read_settings(resilience=settings).resilience, endpoints=[server.url]
    )
    return resilient.pool.breaker(server.url)


def test_done_when_four_processes_against_a_503_origin(fake_server: FakeServer) -> None:
    """Four processes, one call each, share one circuit: the first three get E302 (the third
    trips it and reports its own), the fourth E309 without sending anything to the server."""
    fake_server.configure(
        fail_next=-1, fail_with="http503", fail_methods=["initialize", "tools/call"]
    )
    env = {"DOCLANE_RETRY_MAX_TRIES": "1", "DOCLANE_BREAKER_FAIL_MAX": "3"}
    codes = []
    for _ in range(3):
        codes.append(doclane_call(fake_server, **env)["error"]["code"])
    before_fourth = requests_seen(fake_server)
    fourth = doclane_call(fake_server, **env)
    codes.append(fourth["error"]["code"])
    assert codes == ["E302", "E302", "E302", "E309"]
    assert fourth["error"]["retryable"] is True and fourth["error"]["retry_after"] > 0
    assert requests_seen(fake_server) == before_fourth  # the fourth sent nothing


def test_failures_from_two_processes_open_the_circuit_for_a_third(fake_server: FakeServer) -> None:
    fake_server.configure(fail_next=-1, fail_with="http500", fail_methods=["initialize"])
    env = {"DOCLANE_RETRY_MAX_TRIES": "1", "DOCLANE_BREAKER_FAIL_MAX": "2"}
    # two different processes, one failure each
    assert doclane_call(fake_server, **env)["error"]["code"] == "E302"
    assert doclane_call(fake_server, **env)["error"]["code"] == "E302"
    seen = requests_seen(fake_server)
    # a third process, and this test process, both see the circuit open
    assert doclane_call(fake_server, **env)["error"]["code"] == "E309"
    assert breaker_of(fake_server, breaker_fail_max=2).snapshot()["state"] == "open"
    assert requests_seen(fake_server) == seen


def doclane_call_started(server: FakeServer, **env: str) -> subprocess.Popen[str]:
    """``doclane mcp call --json`` in its own process, left running."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "mcp", "call", CONVERT,
         "--args", json.dumps({"source": DOCX}), "--origin", server.url, "--json"],
        cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def open_the_circuit(server: FakeServer, env: dict[str, str]) -> Any:
    """One failing process opens the circuit (fail_max 1); an observer waits out the reset."""
    server.configure(fail_next=1, fail_with="http503", fail_methods=["initialize"])
    assert doclane_call(server, **env)["error"]["code"] == "E302"
    observer = breaker_of(
        server, breaker_fail_max=1, breaker_reset_s=float(env["DOCLANE_BREAKER_RESET_S"])
    )
    assert observer.snapshot()["state"] == "open"
    wait_for(lambda: observer.retry_after() == 0, timeout=10, message="reset time passed")
    return observer


ONE_SHOT = {"DOCLANE_RETRY_MAX_TRIES": "1", "DOCLANE_BREAKER_FAIL_MAX": "1",
            "DOCLANE_BREAKER_RESET_S": "1"}  # fmt: skip


def test_after_the_reset_one_trial_goes_through_and_success_closes(
    fake_server: FakeServer,
) -> None:
    observer = open_the_circuit(fake_server, ONE_SHOT)
    initialized = fake_server.stats()["initialize_calls"]
    trial = doclane_call(fake_server, **ONE_SHOT)
    assert trial["ok"] is True
    assert fake_server.stats()["initialize_calls"] == initialized + 1
    snapshot = observer.snapshot()
    assert (snapshot["state"], snapshot["failures"]) == ("closed", 0)
    # the fleet's count of what the circuit went through, across all those processes
    assert snapshot["transitions"] == {"open": 1, "half-open": 1, "closed": 1}


def test_half_open_lets_one_trial_through_across_processes(fake_server: FakeServer) -> None:
    """pybreaker's own half-open state would admit every process; the fleet sends one trial."""
    observer = open_the_circuit(fake_server, ONE_SHOT)
    fake_server.configure(fail_next=1, fail_with="hang", fail_methods=["tools/call"])
    trial = doclane_call_started(fake_server, **ONE_SHOT)
    try:
        wait_for(
            lambda: any(f["fault"] == "hang" for f in fake_server.stats()["faults_injected"]),
            timeout=30,
            message="the trial call to reach the server",
        )
        assert observer.snapshot()["state"] == "half-open"
        seen = requests_seen(fake_server)
        second = doclane_call(fake_server, **ONE_SHOT)  # another process, during the trial
        assert second["error"]["code"] == "E309" and second["error"]["retry_after"] > 0
        assert requests_seen(fake_server) == seen  # refused without a request
    finally:
        fake_server.reset()  # releases the hanging call: the server answers -32603
        out, err = trial.communicate(timeout=60)
    assert json.loads(out)["error"]["code"] == "E204", err
    assert observer.snapshot()["state"] == "open"  # a failed trial opens the circuit again
    assert observer.retry_after() > 0


def test_retries_grow_and_succeed_through_the_real_client(fake_server: FakeServer) -> None:
    fake_server.configure(fail_next=2, fail_with="http503")
    resilient = build_resilient(
        read_settings().mcp,
        read_settings(resilience=dict(retry_base_s=0.01, breaker_fail_max=5)).resilience,
        endpoints=[fake_server.url],
    )
    record = RetryRecord()
    with resilient:
        result = resilient.run(lambda c: c.call_tool(CONVERT, {"source": DOCX}), record=record)
    assert not result.is_error
    assert record.tries == 3
    assert [c for c, _, _ in record.waits] == ["E302", "E302"]
    assert record.waits[0][1] < record.waits[1][1]
    assert fake_server.stats()["requests_by_tool"][CONVERT] == 3


def test_a_non_retryable_error_is_tried_once(fake_server: FakeServer) -> None:
    fake_server.configure(fail_next=-1, fail_with="jsonrpc:-32602")
    resilient = build_resilient(read_settings().mcp, endpoints=[fake_server.url])
    with resilient, pytest.raises(Exception) as caught:
        resilient.run(lambda c: c.call_tool(CONVERT, {"source": DOCX}))
    assert getattr(caught.value, "code", None) == "E203"
    assert fake_server.stats()["requests_by_tool"][CONVERT] == 1


def test_a_pool_of_two_keeps_converting_when_one_stops(fake_server_factory: Any) -> None:
    first, second = fake_server_factory(), fake_server_factory()
    settings = read_settings(resilience=dict(retry_base_s=0.01, breaker_fail_max=2)).resilience
    with build_resilient(
        read_settings().mcp, settings, endpoints=[first.url, second.url]
    ) as resilient:

        def convert_and_export(client: McpClient) -> tuple[str, str]:
            key = client.call_tool(CONVERT, {"source": DOCX}).structured["document_key"]
            markdown = client.call_tool(EXPORT, {"document_key": key}).structured["markdown"]
            return client.origin, markdown

        served = {resilient.run(convert_and_export)[0] for _ in range(4)}
        assert served == {first.origin, second.origin}  # spread over both
        first.stop()
        outcomes = [resilient.run(convert_and_export) for _ in range(8)]
        assert all("quarterly" in markdown.lower() for _, markdown in outcomes)
        assert resilient.pool.breaker(first.url).is_open()
        assert {origin for origin, _ in outcomes[-4:]} == {second.origin}


def test_without_redis_the_breaker_lives_in_memory_and_says_so(
    fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    settings = read_settings(
        resilience=dict(redis_url="redis://127.0.0.1:1/0")
    ).resilience  # nothing listens
    with build_resilient(read_settings().mcp, settings, endpoints=[fake_server.url]) as r:
        assert not r.run(lambda c: c.call_tool(CONVERT, {"source": DOCX})).is_error
        assert r.breakers()[0]["shared"] is False
    assert "falls back to per-process memory" in caplog.text


def test_ping_json_shows_the_breakers(fake_server: FakeServer) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "mcp", "ping",
         "--origin", fake_server.url, "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    (breaker,) = json.loads(proc.stdout)["breakers"]
    assert breaker["origin"] == fake_server.origin
    assert (breaker["state"], breaker["failures"], breaker["shared"]) == ("closed", 0, True)
