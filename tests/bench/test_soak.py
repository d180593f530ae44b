"""The soak still runs: at its smoke size (300 documents; worker b killed, its own Redis and
its own PostgreSQL restarted, the server stopped past the breaker's reset), its report's shape
checked, and the two figures that are promises rather than measurements: no job lost, no result
written twice. Once against the fake server, once against docling-rs-mcp (the real server, over
HTTP, stopped and started on its port). Its services are the bench's own
(bench/harness/private.py): the machine's PostgreSQL and Redis are never restarted."""

from __future__ import annotations

import pytest

from tests.fixtures.benches import run_bench


@pytest.mark.parametrize("server", ["fake", "docling-rs-mcp"])
def test_soak_loses_no_job_through_kills_and_restarts(server: str) -> None:
    report = run_bench("soak", "--smoke", "--server", server, timeout=600)
    assert report["server"] == server
    assert report["jobs_lost"] == 0 and report["unfinished"] == 0, report["states"]
    assert report["results_doubled"] == 0
    faults = [fault["what"] for fault in report["faults"]]
    assert "SIGKILL worker b" in faults
    assert any(what.startswith("restart Redis") for what in faults)
    assert "restart PostgreSQL" in faults
    assert any(what.startswith("stop the server") for what in faults)
    assert report["latency_s"]["p99"] >= report["latency_s"]["p50"] > 0
    assert {"a_growth_per_100k", "b_max"} <= set(report["rss_mb"])
    assert set(report["postgres_growth_mb_per_100k"]) >= {"jobs", "results", "job_events"}
    assert set(report["reconciler"]) >= {"requeued", "stale", "lost", "published"}
    assert report["convert_calls_in_trails"] >= report["jobs"]
