"""Migration 0025: the job's writes call only the triggers their guarantees need, and every
guarantee holds whichever statement writes: a progress write calls no trigger function and
leaves no history; a change of state, by any kind of statement, is checked and in the trail."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import psycopg
import pytest
from psycopg import errors as pg_errors

from pipeline.jobs.model import EventKind, Job, JobState
from pipeline.store.queries import query
from pipeline.store.rows import AttemptResults, CallEvent
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job

#: The columns a running attempt's progress writes; every other column moves updated_at.
PROGRESS_COLUMNS = {"stage", "server_origin", "lease_expires_at", "updated_at"}


def function_calls(conn: psycopg.Connection, *names: str) -> dict[str, int]:
    """How often these functions ran in this database so far (``track_functions`` on)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(
        "SELECT funcname, sum(calls) FROM pg_stat_user_functions"
        " WHERE funcname = ANY(%s) GROUP BY funcname",
        [list(names)],
    ).fetchall()
    return {name: int(n) for name, n in rows}


def state_changes(conn: psycopg.Connection, job_id: UUID) -> list[tuple[str | None, str]]:
    rows = conn.execute(
        "SELECT from_state, to_state FROM job_events"
        " WHERE job_id = %s AND kind = 'state_change' ORDER BY id",
        [job_id],
    ).fetchall()
    return [(a, b) for a, b in rows]


def test_progress_calls_no_trigger_function_and_writes_no_history(
    job_factory: Callable[..., Job], store: JobStore, raw_sql: psycopg.Connection
) -> None:
    """The store's own progress statements, on a session that counts its function calls."""
    raw_sql.execute("SET track_functions = 'pl'")
    job = job_factory(JobState.RUNNING)
    events = len(store.reads.events(job.id))
    watched = ("jobs_guard_update", "jobs_touch_update", "tenant_lane_add")
    before = function_calls(raw_sql, *watched)
    fence = {"job_id": job.id, "attempt": job.attempt}

    renewed = raw_sql.execute(query("renew_lease"), {**fence, "lease_s": 600.0}).fetchone()
    assert renewed == (True,)
    staged = raw_sql.execute(
        query("record_progress"),
        {**fence, "stage": "converting", "origin": "http://o", "calls": None},
    ).fetchone()
    assert staged == (True,)
    raw_sql.execute(
        "UPDATE jobs SET lease_expires_at = now() + interval '1 hour', stage = 'exporting'"
        " WHERE id = %s",
        [job.id],
    )

    assert function_calls(raw_sql, *watched) == before, "the WHEN clauses and column lists"
    assert len(store.reads.events(job.id)) == events, "no history without a change of state"
    # a change that is not progress calls the touch alone, and still writes no history
    sourced = raw_sql.execute(
        query("record_source"), {**fence, "size_bytes": 9, "content_sha256": "c" * 64}
    )
    assert sourced.rowcount == 1
    after = function_calls(raw_sql, *watched)
    assert after.get("jobs_touch_update", 0) == before.get("jobs_touch_update", 0) + 1
    assert after.get("jobs_guard_update") == before.get("jobs_guard_update")
    assert len(store.reads.events(job.id)) == events
    # and a change of state calls the guard, once
    raw_sql.execute(
        query("mark_failed"),
        {**fence, "stage": None, "error_code": "E399", "error_message": "x", "error_detail": None},
    )
    last = function_calls(raw_sql, *watched)
    assert last.get("jobs_guard_update", 0) == before.get("jobs_guard_update", 0) + 1
    assert len(store.reads.events(job.id)) == events + 1


def test_a_lease_renewal_is_an_update_in_place(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection
) -> None:
    """No index reads the lease, so a renewal makes no index entry (a HOT update)."""
    job = job_factory(JobState.RUNNING)
    with raw_sql.transaction():
        raw_sql.execute(
            "UPDATE jobs SET lease_expires_at = now() + interval '1 hour'"
            " WHERE id = %s AND attempt = %s AND state = 'running'",
            [job.id, job.attempt],
        )
        row = raw_sql.execute(
            "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass),"
            " pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)"
        ).fetchone()
    assert row == (1, 1)


def test_the_touch_trigger_lists_every_column_but_a_running_attempt_s_progress(
    raw_sql: psycopg.Connection,
) -> None:
    """A column added to jobs later must be added to jobs_touch_update's list (or to the
    progress columns, on purpose), else a change of it would not move updated_at."""
    columns = {
        name
        for (name,) in raw_sql.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'jobs'::regclass"
            " AND attnum > 0 AND NOT attisdropped"
        )
    }
    listed = {
        name
        for (name,) in raw_sql.execute(
            "SELECT a.attname FROM pg_trigger t"
            " JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = ANY(t.tgattr)"
            " WHERE t.tgrelid = 'jobs'::regclass AND t.tgname = 'jobs_touch_update'"
        )
    }
    assert listed == columns - PROGRESS_COLUMNS


#: Ways into a change of state other than a plain UPDATE of one row: each must reach the guard.
STATEMENTS = {
    "update from": (
        "UPDATE jobs j SET state = 'cancelled' FROM (SELECT %(id)s::uuid AS id) x WHERE j.id = x.id"
    ),
    "update in a CTE": (
        "WITH gone AS (UPDATE jobs SET state = 'cancelled' WHERE id = %(id)s RETURNING id)"
        " SELECT count(*) FROM gone"
    ),
    "upsert": (
        "INSERT INTO jobs (id, source_kind, source_uri, profile, formats, queue)"
        " VALUES (%(id)s, 'file', '/x', 'auto', '{md}', 'doclane.small')"
        " ON CONFLICT (id) DO UPDATE SET state = 'cancelled'"
    ),
    "merge": (
        "MERGE INTO jobs j USING (SELECT %(id)s::uuid AS id) x ON j.id = x.id"
        " WHEN MATCHED THEN UPDATE SET state = 'cancelled'"
    ),
}


@pytest.mark.parametrize("way", sorted(STATEMENTS))
def test_a_change_of_state_by_any_statement_is_logged(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection, way: str
) -> None:
    job = job_factory(JobState.QUEUED)
    raw_sql.execute(STATEMENTS[way], {"id": job.id})
    assert state_changes(raw_sql, job.id) == [(None, "queued"), ("queued", "cancelled")]
    lanes = raw_sql.execute("SELECT recount_tenant_lanes()").fetchone()
    assert lanes == (0,), "the lanes counted the job out"


@pytest.mark.parametrize("way", sorted(STATEMENTS))
def test_an_illegal_change_by_any_statement_is_refused(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection, way: str
) -> None:
    job = job_factory(JobState.SUCCEEDED)
    with pytest.raises(pg_errors.CheckViolation, match="terminal"):
        raw_sql.execute(STATEMENTS[way], {"id": job.id})
    assert state_changes(raw_sql, job.id)[-1] == ("running", "succeeded")


def test_a_statement_over_many_rows_logs_the_rows_whose_state_changed(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection
) -> None:
    queued = [job_factory(JobState.QUEUED) for _ in range(2)]
    running = job_factory(JobState.RUNNING)
    ids = [job.id for job in (*queued, running)]
    raw_sql.execute(
        "UPDATE jobs SET state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END,"
        " priority = 3 WHERE id = ANY(%s)",
        [ids],
    )
    for job in queued:
        assert state_changes(raw_sql, job.id)[-1] == ("queued", "cancelled")
    assert state_changes(raw_sql, running.id) == [(None, "queued"), ("queued", "running")]


def test_a_state_change_made_by_a_trigger_is_logged(store: JobStore) -> None:
    """A parent's cancel cancels its slices from a trigger (0017): each slice's change too."""
    parent = store.submissions.create(new_job(slices=("1-2", "3")), dedup=False).job_id
    slices = store.reads.slices(parent)
    assert store.operations.cancel(parent) is not None
    for piece in slices:
        trail = [(e.from_state, e.to_state) for e in store.reads.events(piece.id)]
        assert trail[-1] == (JobState.QUEUED, JobState.CANCELLED)


def test_a_round_s_ends_keep_each_job_s_trail_in_order(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    """finish_attempts (one statement for a round): each job's calls, then its note, then its
    change of state; its results name the engine its note named."""
    jobs = [job_factory(JobState.RUNNING, formats=("md", "json")) for _ in range(3)]
    ends = [
        AttemptResults(
            job.id,
            job.attempt,
            {"md": f"# {n}", "json": "{}"},
            calls=[CallEvent("convert", 0.01, "ok", origin="o"), CallEvent("export", 0.02, "ok")],
            note={"note": "converted", "engine": f"engine {n}"},
            origin="http://server",
        )
        for n, job in enumerate(jobs)
    ]
    assert store.attempts.finish_together(ends) == [True, True, True]
    for n, job in enumerate(jobs):
        trail = [(e.kind, e.tool, e.to_state) for e in store.reads.events(job.id)][2:]
        assert trail == [
            (EventKind.MCP_CALL, "convert", None),
            (EventKind.MCP_CALL, "export", None),
            (EventKind.NOTE, None, None),
            (EventKind.STATE_CHANGE, None, JobState.SUCCEEDED),
        ]
        results = store.reads.list_results(job.id)
        assert {(r.format, r.engine) for r in results} == {
            ("json", f"engine {n}"),
            ("md", f"engine {n}"),
        }
        finished = store.reads.get_job(job.id)
        assert finished is not None and finished.server_origin == "http://server"
    assert store.attempts.finish_together(ends) == [False, False, False], "each fenced"
