"""The client, enqueue and memory benches still run: each at its smoke size, its report's shape
checked (never its figures: benchmarks are not timed tests; the figures are in
docs/benchmarks.md)."""

from __future__ import annotations

import pytest

from tests.fixtures.benches import run_bench
from tests.support.brokers import small_queue_messages


def test_client_overhead_compares_three_clients_in_both_revisions() -> None:
    report = run_bench("client_overhead", "--smoke")
    assert set(report["revisions"]) == {"2025-11-25", "2026-07-28"}
    for revision, figures in report["revisions"].items():
        assert set(figures["negotiated"].values()) == {revision}  # every client spoke it
        for key in ("median_ms_per_call", "median_cpu_ms_per_call"):
            assert set(figures[key]) == {"doclane", "sdk", "bare"}
            assert all(value > 0 for value in figures[key].values())
        assert figures["doclane_vs_sdk"] > 0 and figures["cpu_doclane_vs_bare"] > 0


def test_enqueue_creates_and_publishes_one_job_per_file() -> None:
    report = run_bench("enqueue", "--smoke", "--phases")
    assert report["ok"], report["runs"]
    (run,) = report["runs"]
    # a message per eight small files: their claim rights (pipeline.queues.JOBS_PER_MESSAGE)
    assert run["jobs"] == report["files"] and run["problems"] == []
    assert run["messages"] == small_queue_messages(report["files"])
    assert report["median_s"] > 0
    steps = {"walk_validate_hash", "copy", "publish", "rest", "start_and_exit"}
    assert set(report["phases"]) == steps and all(s > 0 for s in report["phases"].values())


def test_worker_memory_reports_growth_and_every_peak() -> None:
    report = run_bench("worker_memory", "--smoke")
    assert set(report["rss_mb"]) == {"after_10", f"after_{report['jobs']}"}
    assert set(report["growth_mb"]) == {"pool", "main"}
    replies, stores = report["reply_alone"], report["storing_wires"]
    assert set(stores) == {"json", "stdio"}
    for figures in (report["storing"], report["serving"], *replies.values(), *stores.values()):
        assert figures["peak_mb"] >= figures["rss_before_mb"] > 0
    assert report["serving"]["bytes"] == report["result_mb"] * 1024 * 1024
    versions = {wire: figures["version"] for wire, figures in replies.items()}
    assert versions == {"sse": "2025-11-25", "json": "2026-07-28", "stdio": "2026-07-28"}


@pytest.mark.docling
def test_worker_memory_stores_through_docling_rs_both_ways() -> None:
    """Needs the real docling-rs-mcp (scripts/test installs it). Its rows alone: the fake
    server's figures are the test above's."""
    report = run_bench("worker_memory", "--smoke", "--only-docling-rs")
    assert "storing" not in report and "rss_mb" not in report
    assert set(report["docling_rs"]) == {"stdio", "http"}
    for figures in report["docling_rs"].values():
        assert figures["markdown_bytes"] > 0
        for peak in (figures["storing"], figures["reply_alone"]):
            assert peak["peak_mb"] >= peak["rss_before_mb"] > 0


def test_mcp_hardening_ends_every_misbehaving_call_with_its_code() -> None:
    # 12 MB: just over the 10 MiB bound the bench sets, so the oversize reply is refused.
    report = run_bench("mcp_hardening", "--rounds", "1", "--oversize-bytes", "12000000")
    calls = report["calls"]
    assert set(calls) == {"keepalive", "trickle", "oversize"}
    assert calls["keepalive"]["codes"] == calls["trickle"]["codes"] == ["E303"]
    assert calls["oversize"]["codes"] == ["E312"]
    assert all(len(c["wall_s"]) == len(c["peak_rss_kib"]) == 1 for c in calls.values())


@pytest.mark.docling
def test_stdio_throughput_converts_every_copy_both_ways() -> None:
    """Needs the real docling-mcp (scripts/test installs it): the six samples of examples/."""
    report = run_bench(
        "investigations.stdio_throughput", "--rounds", "1", "--modes", "http:1,stdio:1"
    )
    rows = report["modes"]
    assert [(row["topology"], row["callers"]) for row in rows] == [("http", 1), ("stdio", 1)]
    assert all(row["documents"] == 6 and row["docs_per_s"] > 0 for row in rows)


def test_worker_memory_measures_the_sse_parser_alone() -> None:
    report = run_bench("worker_memory", "--sse-alone", "--result-mb", "2")
    assert set(report["sse_alone"]) == {"sse", "parse", "stream"}
    for figures in report["sse_alone"].values():
        assert figures["peak_mb"] >= figures["rss_before_mb"] > 0
