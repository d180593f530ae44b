"""``bench/stats_start.py`` still runs: one round against a live worker, its report's shape."""

from __future__ import annotations

from tests.fixtures.benches import run_bench


def test_stats_start_times_stats_beside_version_with_a_worker_alive() -> None:
    report = run_bench("stats_start", "--runs", "1")
    assert report["runs"] == 1 and report["workers_alive"]
    (checkout,) = report["checkouts"].values()
    assert set(checkout) == {"stats", "version", "beyond_version"}
    assert checkout["stats"]["cpu_s"] > 0 and checkout["version"]["wall_s"] > 0
