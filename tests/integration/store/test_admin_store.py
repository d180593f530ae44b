"""JobStore on real PostgreSQL: all-time totals through the rollups (counted once, whoever
reads), the MCP trail in sums, throughput, percentiles, and job lists by any mix of filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from errors import DatabaseUnavailable, SourceNotFound
from pipeline.jobs.model import JobState, NewJob, SourceKind
from pipeline.settings.tree import read_settings
from pipeline.store.admin import JobFilter
from pipeline.store.store import JobStore

_OLD_FINISHED = """
INSERT INTO jobs (source_kind, source_uri, profile, formats, queue, state, attempt,
                  attempts_spent, error_code, error_message, created_at, started_at,
                  finished_at, updated_at)
SELECT 'file', '/old/' || i, 'auto', '{md}', 'doclane.small', %(state)s, 1, 1, %(code)s,
       CASE WHEN %(code)s::text IS NULL THEN NULL ELSE 'old failure' END,
       now() - interval '3 days', now() - interval '3 days', now() - interval '2 days',
       now() - interval '2 days'
FROM generate_series(1, %(n)s) i
"""


def _job(n: int, queue: str = "doclane.small") -> NewJob:
    return NewJob(
        source_kind=SourceKind.FILE, source_uri=f"/in/{n}.md", queue=queue, size_bytes=100
    )


def _run(admin: JobStore, n: int, *, fail: str | None = None, queue: str = "doclane.small"):  # type: ignore[no-untyped-def]
    job_id = admin.submissions.create(_job(n, queue)).job_id
    job = admin.attempts.claim(job_id, "w1", 60)
    assert job is not None
    admin.attempts.record_mcp_call(job_id, 1, tool="convert", duration_s=0.03, outcome="ok")
    if fail:
        assert admin.attempts.fail(job_id, 1, SourceNotFound("gone"))
    else:
        assert admin.attempts.finish(job_id, 1, {"md": "# done"})
    return job_id


def test_totals_count_history_in_the_rollup_once_and_recent_jobs_row_by_row(
    admin: JobStore, raw_sql: psycopg.Connection
) -> None:
    # History from two days ago, loaded as the bench does (triggers off: rows born finished),
    # with the rollup marks sent back so that the next reader must roll it up.
    raw_sql.execute("SET session_replication_role = replica")
    raw_sql.execute(_OLD_FINISHED, {"state": "succeeded", "code": None, "n": 50})
    raw_sql.execute(_OLD_FINISHED, {"state": "failed", "code": "E303", "n": 7})
    raw_sql.execute("SET session_replication_role = origin")
    raw_sql.execute(
        "UPDATE rollup_marks SET finished_before = '2000-01-01', events_before = '2000-01-01'"
    )
    _run(admin, 1)
    _run(admin, 2, fail="E101")
    admin.submissions.create(_job(3))

    first = {(t.state, t.error_code): t.jobs for t in admin.admin.finished_totals()}
    rolled = raw_sql.execute("SELECT state, error_code, jobs FROM finished_rollup").fetchall()
    second = {(t.state, t.error_code): t.jobs for t in admin.admin.finished_totals()}

    assert (
        first
        == second
        == {
            (JobState.SUCCEEDED, None): 51,
            (JobState.FAILED, "E303"): 7,
            (JobState.FAILED, "E101"): 1,
        }
    )
    assert sorted(rolled) == [("failed", "E303", 7), ("succeeded", "", 50)]
    assert admin.admin.roll_up() is False  # fresh marks: nothing to do
    assert admin.reads.count_in_flight()[JobState.QUEUED] == 1


def test_the_trail_in_sums_mcp_calls_by_bucket_and_retries(admin: JobStore) -> None:
    _run(admin, 1)
    _run(admin, 2, fail="E101")
    totals = admin.admin.event_totals()
    calls = [t for t in totals if t.kind == "mcp_call"]
    bounds = admin.admin.mcp_duration_bounds()
    assert [(t.name, t.outcome, t.events) for t in calls] == [("convert", "ok", 2)]
    assert bounds[calls[0].bucket - 1] <= 30.0 < bounds[calls[0].bucket]
    entered = {t.name: t.events for t in totals if t.kind == "state_change"}
    assert entered == {"queued": 2, "running": 2, "succeeded": 1, "failed": 1}


def test_throughput_and_percentiles_of_the_last_hour(admin: JobStore) -> None:
    for n in range(3):
        _run(admin, n)
    _run(admin, 9, fail="E101")
    rows = admin.admin.throughput()
    assert sum(r.last_1m for r in rows) == sum(r.last_60m for r in rows) == 4
    assert {r.minutes_ago for r in rows} == {0}
    [small] = admin.admin.conversion_percentiles(3600)
    assert (small.tier, small.jobs) == ("small", 3) and 0 <= small.p50_s <= small.p95_s


def test_job_lists_apply_every_filter_newest_first(admin: JobStore) -> None:
    a = _run(admin, 1, fail="E101")
    b = _run(admin, 2, fail="E101", queue="doclane.large")
    c = _run(admin, 3)
    assert [j.id for j in admin.admin.list_jobs(JobFilter())] == [c, b, a]
    assert [j.id for j in admin.admin.list_jobs(JobFilter(state=JobState.FAILED))] == [b, a]
    assert [
        j.id for j in admin.admin.list_jobs(JobFilter(error_code="E101", queue="doclane.large"))
    ] == [b]
    assert admin.admin.list_jobs(JobFilter(state=JobState.FAILED, error_code="E303")) == []
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert admin.admin.list_jobs(JobFilter(since=later)) == []
    assert len(admin.admin.list_jobs(JobFilter(limit=1))) == 1


def test_a_database_without_the_schema_says_to_migrate(empty_database_url: str) -> None:
    store = JobStore(
        read_settings(store=dict(database_url=empty_database_url, pool_timeout_s=5)).store,
        explain_missing_schema=True,
    )
    try:
        with pytest.raises(DatabaseUnavailable, match="doclane db migrate"):
            store.admin.finished_totals()
    finally:
        store.close()
