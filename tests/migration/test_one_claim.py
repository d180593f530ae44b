"""Migration 0012: one claim function, called by a lone claim and by a batch's claim alike."""

from __future__ import annotations

from uuid import uuid4

import psycopg
import pytest

from pipeline.jobs.model import Job, JobState, NewJob, SourceKind
from pipeline.store.attempts import BatchLimits
from pipeline.store.store import JobStore

SIGNATURE = "claim_jobs(uuid[], text, float8, text)"


def queue_jobs(store: JobStore, count: int) -> None:
    specs = [
        NewJob(
            source_kind=SourceKind.FILE,
            source_uri=f"/inbox/{uuid4()}.pdf",
            queue="doclane.small",
            size_bytes=1000,
        )
        for _ in range(count)
    ]
    store.submissions.create_many(specs, dedup=False)


def test_the_claim_function_exists(raw_sql: psycopg.Connection) -> None:
    row = raw_sql.execute("SELECT to_regprocedure(%s)::text", [SIGNATURE]).fetchone()
    assert row is not None and row[0] == "claim_jobs(uuid[],text,double precision,text)"


def test_a_lone_claim_and_a_batch_claim_both_go_through_it(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    queue_jobs(store, 3)
    ids = [r[0] for r in raw_sql.execute("SELECT id FROM jobs ORDER BY id")]
    lead_id, *others = ids

    def claim_batch() -> list[Job]:
        lead = store.reads.get_job(lead_id)
        assert lead is not None
        limits = BatchLimits(max_bytes=10**6, table_suffixes=frozenset(), table_max_bytes=0)
        return store.attempts.claim_companions(
            lead, "w", 60, limit=5, small_below=10**6, batch=limits
        )

    raw_sql.execute(f"ALTER FUNCTION {SIGNATURE} RENAME TO claim_jobs_away")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        store.attempts.claim(lead_id, "w", 60)
    with pytest.raises(psycopg.errors.UndefinedFunction):
        claim_batch()

    raw_sql.execute(
        "ALTER FUNCTION claim_jobs_away(uuid[], text, float8, text) RENAME TO claim_jobs"
    )
    lead = store.attempts.claim(lead_id, "w", 60)
    assert lead is not None and (lead.state, lead.attempt) == (JobState.RUNNING, 1)
    companions = claim_batch()
    assert sorted(j.id for j in companions) == sorted(others)
