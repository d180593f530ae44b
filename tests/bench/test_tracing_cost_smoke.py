"""``bench/investigations/tracing_cost.py`` still runs: one round of tracing off and on, its
report's shape, and that "on" exported spans and stored each job's trace context while "off"
did neither."""

from __future__ import annotations

from tests.fixtures.benches import run_bench


def test_tracing_cost_runs_off_then_on() -> None:
    report = run_bench("investigations.tracing_cost", "--smoke")
    off, on = report["runs"]
    assert (off["mode"], on["mode"]) == ("off", "on")
    assert off["spans_received"] == 0 and off["jobs_with_trace_context"] == 0
    assert on["spans_received"] > 0 and on["jobs_with_trace_context"] == on["jobs"]
    assert report["median_ratio_on_over_off"] > 0
