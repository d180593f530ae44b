"""job_events: every change of state and every MCP call is there, and nothing can be rewritten."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg import errors as pg_errors

from errors import InternalError
from pipeline.jobs.model import EventKind, Job, JobState
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job


def test_a_jobs_whole_life_is_in_its_trail(store: JobStore) -> None:
    job_id = store.submissions.create(new_job(source_uri="/inbox/report.docx")).job_id
    first = store.attempts.claim(job_id, "worker-a", lease_s=60)
    assert first is not None
    store.attempts.record_mcp_call(
        job_id,
        first.attempt,
        tool="convert_document_into_docling_document",
        duration_s=1.5,
        outcome="error",
        error_code="E204",
        origin="http://docling:8000",
        detail={"jsonrpc_code": -32603},
    )
    store.attempts.schedule_retry(job_id, first.attempt, InternalError("boom"), delay=0)
    second = store.attempts.claim(job_id, "worker-b", lease_s=60)
    assert second is not None
    store.attempts.record_mcp_call(
        job_id, second.attempt, tool="convert", duration_s=0.25, outcome="ok", origin="o"
    )
    store.attempts.add_note(job_id, second.attempt, "document key evicted; converting again")
    assert store.attempts.finish(job_id, second.attempt, {"md": "# report"})

    trail = [
        (e.attempt, e.kind, e.from_state, e.to_state, e.tool, e.error_code)
        for e in store.reads.events(job_id)
    ]
    assert trail == [
        (0, EventKind.STATE_CHANGE, None, JobState.QUEUED, None, None),
        (1, EventKind.STATE_CHANGE, JobState.QUEUED, JobState.RUNNING, None, None),
        (1, EventKind.MCP_CALL, None, None, "convert_document_into_docling_document", "E204"),
        (1, EventKind.STATE_CHANGE, JobState.RUNNING, JobState.RETRYING, None, "E204"),
        (2, EventKind.STATE_CHANGE, JobState.RETRYING, JobState.RUNNING, None, None),
        (2, EventKind.MCP_CALL, None, None, "convert", None),
        (2, EventKind.NOTE, None, None, None, None),
        (2, EventKind.STATE_CHANGE, JobState.RUNNING, JobState.SUCCEEDED, None, None),
    ]
    call = store.reads.events(job_id)[2]
    assert (call.duration_ms, call.outcome, call.server_origin) == (
        1500.0,
        "error",
        "http://docling:8000",
    )
    assert call.detail == {"jsonrpc_code": -32603}


def test_a_bulk_submission_logs_one_event_per_job(store: JobStore) -> None:
    created = store.submissions.create_many([new_job() for _ in range(50)])
    for item in created[:5]:
        events = store.reads.events(item.job_id)
        assert [(e.from_state, e.to_state) for e in events] == [(None, JobState.QUEUED)]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE job_events SET detail = '{}'::jsonb",
        "DELETE FROM job_events",
        "TRUNCATE job_events",
    ],
)
def test_the_trail_is_append_only(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection, statement: str
) -> None:
    job_factory(JobState.SUCCEEDED)
    before = raw_sql.execute("SELECT count(*) FROM job_events").fetchone()
    with pytest.raises(pg_errors.CheckViolation, match="append-only"):
        raw_sql.execute(statement)
    assert raw_sql.execute("SELECT count(*) FROM job_events").fetchone() == before
