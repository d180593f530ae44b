"""The pool in trouble: a half-open origin is skipped, not an error; all open is a quiet E309."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import errors
from pipeline.mcp import McpClient, load_mcp_settings
from pipeline.resilience import RetryRecord, build_resilient, load_resilience_settings
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
DOCX = str(ROOT / "examples" / "quarterly-report.docx")
CONVERT = "convert_document_into_docling_document"


def convert(client: McpClient) -> str:
    client.call_tool(CONVERT, {"source": DOCX})
    return client.origin


def requests_seen(server: FakeServer) -> int:
    return sum(server.stats()["http_requests_by_verb"].values())


def test_a_half_open_origin_with_its_trial_running_is_skipped(fake_server_factory: Any) -> None:
    first, second = fake_server_factory(), fake_server_factory()
    settings = load_resilience_settings(breaker_fail_max=1, breaker_reset_s=0.05)
    with build_resilient(load_mcp_settings(), settings, endpoints=[first.url, second.url]) as r:
        breaker = r.pool.breaker(first.url)

        def sick() -> None:
            raise errors.ServerUnavailable("HTTP 503")

        with pytest.raises(errors.ServerUnavailable):
            breaker.call(sick)
        wait_for(lambda: breaker.retry_after() == 0, timeout=10, message="reset time passed")
        inside, release = threading.Event(), threading.Event()

        def held_trial() -> None:
            inside.set()
            release.wait(30)

        # the first origin's one trial, held open (another process's, in real life)
        trial = threading.Thread(target=breaker.call, args=(held_trial,))
        trial.start()
        assert inside.wait(30)
        try:
            records = [RetryRecord() for _ in range(4)]
            served = [r.run(convert, record=record) for record in records]
        finally:
            release.set()
            trial.join(30)
        assert served == [second.origin] * 4  # no E309 while another origin is usable
        assert [record.tries for record in records] == [1, 1, 1, 1]
        assert requests_seen(first) == 0


def test_every_circuit_open_is_e309_without_a_request(fake_server_factory: Any) -> None:
    first, second = fake_server_factory(), fake_server_factory()
    settings = load_resilience_settings(breaker_fail_max=1, breaker_reset_s=60, retry_max_tries=1)
    with build_resilient(load_mcp_settings(), settings, endpoints=[first.url, second.url]) as r:
        for server in (first, second):
            server.configure(fail_next=-1, fail_with="http503", fail_methods=["initialize"])
        for _ in range(2):  # each unit fails on one origin; the circuits open one by one
            with pytest.raises(errors.ServerUnavailable):
                r.run(convert, record=RetryRecord())
        seen = requests_seen(first) + requests_seen(second)
        record = RetryRecord()
        with pytest.raises(errors.CircuitOpen) as caught:
            r.run(convert, record=record)
        # Redis keeps whole seconds: the wait is never early, at most a second late
        assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 61
        assert record.tries == 1  # E309 is not retried inside the worker
        assert requests_seen(first) + requests_seen(second) == seen
        assert {b["state"] for b in r.breakers()} == {"open"}
