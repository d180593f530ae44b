"""The pipeline benches at their smoke size: they must keep working; their figures mean nothing.

``bench/pipeline_overhead.py`` and ``bench/scale_out.py`` start a fake server, real workers, a
scratch database and a claimed Redis database, as in a real run, with a handful of jobs;
``bench/investigations/in_worker_calls.py`` does the same against the real docling-mcp (marked
``docling``); ``bench/investigations/server_choice.py`` times the pool's choice of server
against the machine's Redis, and ``bench/investigations/celery_floor.py`` Celery alone with
doclane's broker options. What is checked is what the pipeline or the bench could get wrong
(every job succeeded, counts that follow from the run, figures that agree with each other and
with what a run must take), never a speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.benches import run_bench


def test_pipeline_overhead_smoke() -> None:
    out = run_bench("pipeline_overhead", "--smoke")
    assert len(out["pairs"]) == 3
    alone, in_rounds = out["runs"]
    assert (alone["round_docs"], in_rounds["round_docs"]) == (1, 4)
    for run in (alone, in_rounds):
        assert run["concurrency"] == 1 and run["succeeded"] == run["jobs"] == 12
        # The figures agree with the run's own counts: its rate is its jobs over its time, and a
        # lone job's overhead is its latency less its MCP calls (a broken trail gives no calls).
        assert run["jobs_per_s"] == pytest.approx(run["jobs"] / run["seconds"], rel=0.05)
        assert run["lone_jobs"] == 3 and 0 < run["overhead_ms_p50"] < run["latency_ms_p50"]
        assert run["calls_ms_p50"] > 0 and run["commits_per_job"] > 0
        assert set(run["cpu_ms_per_job"]) == {
            "worker", "worker_main", "submit", "server", "postgres", "redis",
            "worker_drained", "postgres_drained",
        }  # fmt: skip
    medians = [(m["label"], m["concurrency"], m["round_docs"]) for m in out["medians"]]
    assert medians == [("doclane", 1, 1), ("doclane", 1, 4)]


def test_scale_out_smoke() -> None:
    out = run_bench("scale_out", "--smoke")
    assert [(p["servers"], p["workers"]) for p in out["points"]] == [(1, 1), (2, 2)]
    for point in out["points"]:
        assert point["succeeded"] == point["jobs"] and point["jobs_per_s"] > 0
        assert point["linear"] == min(point["workers"], 2 * point["servers"]) * 5
        # Where a job's time went: the 200 ms convert is in its calls, the calls in its claim to
        # commit, and the pipeline's own share is what is left (a broken query gives 0 calls).
        assert point["calls_ms"] >= 200
        assert point["in_job_ms"] > point["calls_ms"]
        assert point["pipeline_ms"] > 0


@pytest.mark.docling
def test_in_worker_calls_smoke() -> None:
    """Needs the real docling-mcp (scripts/test installs it) and bench/corpus.py's corpus."""
    out = run_bench("investigations.in_worker_calls", "--smoke")
    assert out["documents"] == 6 and len(out["rounds"]) == 1
    for tool in ("convert_document_into_docling_document", "export_docling_document_to_markdown"):
        assert out["worker_over_direct"][tool]["calls"] > 0


def test_cold_calls_smoke() -> None:
    out = run_bench("investigations.cold_calls", "--smoke")
    assert set(out["variants"]) == {"back_to_back", "paused"}
    for name, medians in out["variants"].items():  # one round: its median is its one run
        (run,) = out["runs"][name]
        assert medians == {key: round(value, 2) for key, value in run.items()}, name
    # The paused variant sleeps after every pair: it cannot go faster than its pauses allow.
    assert 0 < out["variants"]["paused"]["pairs_per_s"] < 1000 / out["pause_ms"]


def test_server_choice_smoke() -> None:
    out = run_bench("investigations.server_choice", "--smoke")
    (figures,) = out["medians"].values()
    assert set(figures) == {"1", "4"}
    for origins, f in figures.items():  # a unit waits on Redis: its CPU is within its wall time
        assert 0 < f["cpu_ms"] <= f["wall_ms"] * 1.1, origins
    # Not a speed: how many times the pool's client went to Redis for one unit. One origin:
    # the breaker's read; four: every circuit at once, the in-flight choice, the unit's end.
    assert (figures["1"]["round_trips"], figures["4"]["round_trips"]) == (1.0, 3.0)


def test_celery_floor_smoke() -> None:
    out = run_bench("investigations.celery_floor", "--smoke")  # it exits 1 unless every task ran
    assert set(out["ms_per_task"]) == {"1"}
    assert out["runs"]["1"] == [out["ms_per_task"]["1"]]  # one round: the median is that run
    assert out["ms_per_task"]["1"] > 0  # the tasks' stamps are apart: they ran one by one


def test_tenant_fairness_smoke(tmp_path: Path) -> None:
    drawn = tmp_path / "fair-wait.png"
    out = run_bench("tenant_fairness", "--smoke", "--plot", str(drawn))
    assert [w["mode"] for w in out["fair_wait"]] == ["tenants", "one-tenant"]
    for wait in out["fair_wait"]:
        assert wait["small_wait_s"] > 0 and wait["alone_s"] > 0
    assert drawn.read_bytes().startswith(b"\x89PNG"), "the plot is drawn"
    assert [(r["mode"], r["jobs"]) for r in out["rate"]] == [
        ("one-tenant", 20),
        ("two-tenants", 20),
    ]
    for rate in out["rate"]:  # its rate is its jobs over its time
        assert rate["per_s"] == pytest.approx(rate["jobs"] / rate["seconds"], rel=0.05)
    medians = out["rate_median_per_s"]
    assert out["two_over_one"] == pytest.approx(
        medians["two-tenants"] / medians["one-tenant"], rel=0.01
    )
