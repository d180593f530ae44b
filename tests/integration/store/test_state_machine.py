"""The database enforces the job state machine, whoever writes: the store, or raw SQL in psql."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from uuid import UUID

import psycopg
import pytest
from psycopg import errors as pg_errors

from pipeline.jobs.model import LEGAL_TRANSITIONS, TERMINAL_STATES, Job, JobState
from pipeline.store.store import JobStore

ALL_STATES = list(JobState)
ILLEGAL_TRANSITIONS = sorted(
    {
        (a, b)
        for a, b in itertools.product(ALL_STATES, ALL_STATES)
        if (a, b) not in LEGAL_TRANSITIONS and (a != b or a in TERMINAL_STATES)
    }
)

#: For each target state, the UPDATE an operator would type, complete enough that only the
#: transition itself can be what the database objects to.
RAW_UPDATES: dict[JobState, str] = {
    JobState.RUNNING: (
        "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
        " attempts_spent = attempts_spent + 1, lease_owner = 'psql',"
        " lease_expires_at = now() + interval '1 minute' WHERE id = %s"
    ),
    JobState.FAILED: "UPDATE jobs SET state = 'failed', error_code = 'E399' WHERE id = %s",
    JobState.WAITING: "UPDATE jobs SET state = 'waiting', slices_total = 2 WHERE id = %s",
}


def raw_update(conn: psycopg.Connection, job_id: UUID, target: JobState) -> int:
    statement = RAW_UPDATES.get(target, f"UPDATE jobs SET state = '{target}' WHERE id = %s")
    return conn.execute(statement, (job_id,)).rowcount


def test_the_python_mirror_matches_the_database_table(raw_sql: psycopg.Connection) -> None:
    rows = raw_sql.execute("SELECT from_state, to_state FROM job_state_transitions").fetchall()
    assert {(JobState(a), JobState(b)) for a, b in rows} == LEGAL_TRANSITIONS


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL_TRANSITIONS))
def test_every_legal_transition_is_accepted_from_raw_sql(
    job_factory: Callable[..., Job],
    store: JobStore,
    raw_sql: psycopg.Connection,
    source: JobState,
    target: JobState,
) -> None:
    job = job_factory(source)
    assert raw_update(raw_sql, job.id, target) == 1
    after = store.reads.get_job(job.id)
    assert after is not None and after.state is target
    assert (after.lease_owner is not None) == (target is JobState.RUNNING)
    assert (after.finished_at is not None) == (target in TERMINAL_STATES)
    last = store.reads.events(job.id)[-1]
    assert (last.kind, last.from_state, last.to_state) == ("state_change", source, target)


@pytest.mark.parametrize(("source", "target"), ILLEGAL_TRANSITIONS)
def test_every_illegal_transition_is_refused_by_the_database(
    job_factory: Callable[..., Job],
    store: JobStore,
    raw_sql: psycopg.Connection,
    source: JobState,
    target: JobState,
) -> None:
    job = job_factory(source)
    events_before = len(store.reads.events(job.id))
    with pytest.raises(pg_errors.CheckViolation) as refused:
        raw_update(raw_sql, job.id, target)
    reason = refused.value.diag.message_primary or ""
    assert "illegal job state transition" in reason or "terminal" in reason
    after = store.reads.get_job(job.id)
    assert after == job
    assert len(store.reads.events(job.id)) == events_before


def test_the_psql_example_from_the_issue_raises(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection
) -> None:
    job_factory(JobState.SUCCEEDED)
    with pytest.raises(pg_errors.CheckViolation, match="terminal"):
        raw_sql.execute("UPDATE jobs SET state='running' WHERE state='succeeded'")
    states = raw_sql.execute("SELECT state FROM jobs").fetchall()
    assert states == [("succeeded",)]


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_a_terminal_row_refuses_any_change(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection, state: JobState
) -> None:
    job = job_factory(state)
    with pytest.raises(pg_errors.CheckViolation, match="terminal"):
        raw_sql.execute("UPDATE jobs SET priority = 9 WHERE id = %s", (job.id,))


def test_a_new_job_must_start_queued_at_attempt_zero(raw_sql: psycopg.Connection) -> None:
    with pytest.raises(pg_errors.CheckViolation, match="starts queued"):
        raw_sql.execute(
            "INSERT INTO jobs (source_kind, source_uri, profile, formats, queue, state,"
            " error_code, finished_at) VALUES ('file', '/x', 'auto', '{md}', 'q', 'failed',"
            " 'E399', now())"
        )


@pytest.mark.parametrize(
    "statement",
    [
        # the fencing token never goes back, nor moves while running
        "UPDATE jobs SET attempt = attempt - 1 WHERE id = %s",
        "UPDATE jobs SET attempt = attempt + 1 WHERE id = %s",
        # leaving running and coming back must start a new attempt, by exactly one
        "UPDATE jobs SET state = 'queued', attempt = attempt + 1 WHERE id = %s",
    ],
)
def test_the_attempt_number_only_grows_by_one_on_a_claim(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection, statement: str
) -> None:
    job = job_factory(JobState.RUNNING)
    with pytest.raises(pg_errors.CheckViolation, match="attempt"):
        raw_sql.execute(statement, (job.id,))


def test_a_reclaim_without_a_new_attempt_is_refused(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection
) -> None:
    job = job_factory(JobState.RETRYING)
    with pytest.raises(pg_errors.CheckViolation, match="new attempt"):
        raw_sql.execute(
            "UPDATE jobs SET state = 'running', lease_owner = 'x',"
            " lease_expires_at = now() + interval '1 minute' WHERE id = %s",
            (job.id,),
        )
