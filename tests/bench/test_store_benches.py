"""The store benches still run: each at a tiny size, its report checked for what the store and
the bench could get wrong (rows the loader made, rows a query returned, figures that disagree
with each other), never for a speed.

``bench/row_updates.py`` times a job's two updates under each part of the schema;
``bench/store_admin_queries.py`` and ``bench/admin_queries.py`` load a few thousand synthetic
jobs into a scratch database (a million when measuring) and EXPLAIN the store's queries, the
latter through the admin views and ``doclane api`` too; ``bench/fair_claim.py`` EXPLAINs the
fair claim over queued jobs of many tenants; ``bench/investigations/store_restart_first_call.py``
restarts the machine's PostgreSQL (marked ``restarts_postgres``: run alone).
"""

from __future__ import annotations

import pytest

from tests.fixtures.benches import run_bench

TINY = ("--jobs", "2000", "--active", "100", "--runs", "1")


def test_store_admin_queries_explains_every_query() -> None:
    report = run_bench("store_admin_queries", *TINY)
    states, queries = report["states"], report["queries"]
    assert sum(states.values()) == 2000
    assert states["queued"] + states["running"] + states["retrying"] == 100  # --active
    assert len(queries) >= 8
    for label, plan in queries.items():
        assert plan["query"], label
        assert plan["indexes"], label  # every plan read some relation, by index or by scan
    # What each query returned, against the rows the loader made.
    assert queries["counts in flight (queued/running/retrying)"]["rows"] == 3
    assert queries["all-time counts by state (full read)"]["rows"] == len(states)
    for label in ("recent jobs of a queue", "recent failed jobs", "newest jobs"):
        assert queries[label]["rows"] == 50, label  # a page: its limit, with more behind it
    assert 0 < queries["recent jobs with error E303"]["rows"] <= states["failed"]


def test_admin_queries_times_the_views_and_the_api() -> None:
    report = run_bench("admin_queries", *TINY, "--requests", "3")
    assert report["events"] >= 2000  # every job has at least the event of its creation
    assert report["stats_queries"]["counts in flight"]["rows"] == 3  # queued, running, retrying
    assert report["jobs_failed_50"]["rows"] == 50  # a page of failed jobs: its limit
    assert report["status_queries"]["get_job"]["rows"] == 1
    assert set(report["http"]) == {"/v1/stats", "/metrics", "/"}
    for path, figures in report["http"].items():  # each endpoint answered; its figures agree
        assert 0 < figures["median_ms"] <= figures["p90_ms"] <= figures["max_ms"], path


def test_fair_claim_claims_past_the_capped_and_paused_tenants() -> None:
    """20 tenants: two capped at 2 and at their cap (four jobs running), two paused. The page
    cites a message's claim (one job) and a round's (sixteen): each must have claimed them."""
    report = run_bench("fair_claim", "--jobs", "2000", "--tenants", "20", "--runs", "1")
    assert (report["jobs"], report["tenants"]) == (2000, 20)
    assert report["queued"] == 2000 - 2 * 2
    assert (report["lone_claim_rows"], report["round_claim_rows"]) == (1, 16)
    assert report["lone_claim_ms"] > 0 and report["round_claim_ms"] > 0


@pytest.mark.restarts_postgres
def test_store_restart_first_call_times_both_modes() -> None:
    report = run_bench(
        "investigations.store_restart_first_call", "--connections", "1", "--rounds", "1"
    )
    assert set(report["first_call_s"]) == {"sweep on", "sweep off"}
    assert all(len(times) == 1 and times[0] > 0 for times in report["first_call_s"].values())


def test_row_updates_times_each_variant_and_every_job_ends_succeeded() -> None:
    """The bench itself refuses a variant whose updates did not take every job to succeeded
    (a disabled trigger or a dropped index must leave the state machine's path working)."""
    variants = (
        "as-is",
        "before:0025",
        "fewer-indexes",
        "without:jobs_count_lanes_updated",
        "without:jobs_guard_update",
        "no-triggers",
    )
    report = run_bench("row_updates", "--smoke", "--variants", ",".join(variants))
    assert report["jobs"] == 50
    assert set(report["variants"]) == set(variants)
    shape = {v: (f["triggers_on"], f["indexes"]) for v, (f,) in report["variants"].items()}
    triggers, indexes = shape["as-is"]
    # Each variant took away what its name says, and nothing else.
    assert shape["fewer-indexes"] == (triggers, indexes - 5)
    for name in ("jobs_count_lanes_updated", "jobs_guard_update"):
        assert shape[f"without:{name}"] == (triggers - 1, indexes), name
    assert shape["no-triggers"] == (0, indexes) and triggers >= 3
    # the schema before 0025: the history trigger apart, no touch trigger; the lease index, and
    # the old batch search's (dropped by 0026, after it)
    assert shape["before:0025"] == (triggers, indexes + 2)
    for variant, (figures,) in report["variants"].items():
        assert figures["backend_cpu_ms"] > 0 and figures["wall_ms"] > 0, variant
        assert figures["renewal_cpu_ms"] >= 0, variant
        assert 0 <= figures["renewals_hot"] <= 1, variant
    for variant in ("as-is", "before:0025"):  # the round's end as each schema's store sends it
        figures = report["variants"][variant][0]
        assert figures["finish_attempt_cpu_ms"] >= 0 and figures["round_end_cpu_ms"] >= 0, variant
