"""Building jobs for the store tests: specs, and driving a job into any state through the store."""

from __future__ import annotations

import hashlib
from typing import Any
from uuid import UUID, uuid4

import psycopg

from errors import ConversionFailed, ServerUnavailable
from pipeline.jobs.model import Job, JobState, NewJob, SourceKind
from pipeline.store.attempts import ClaimFound
from pipeline.store.store import JobStore


def new_job(**overrides: Any) -> NewJob:
    """A job spec with a unique source; override what the test is about."""
    values: dict[str, Any] = {
        "source_kind": SourceKind.FILE,
        "source_uri": f"/inbox/{uuid4()}.docx",
        "queue": "doclane.small",
        "formats": ("md",),
        "size_bytes": 1234,
    }
    values.update(overrides)
    return NewJob(**values)


def tenant(raw: psycopg.Connection, name: str, *, weight: int = 1, cap: int | None = None) -> str:
    """The tenant ``name`` with this weight and running cap, made or changed."""
    raw.execute(
        "INSERT INTO tenants (name, weight, max_running) VALUES (%s, %s, %s) "
        "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight, "
        "max_running = excluded.max_running",
        (name, weight, cap),
    )
    return name


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def job_in_state(store: JobStore, state: JobState, **overrides: Any) -> Job:
    """A new job brought to ``state`` the way the pipeline would bring it there."""
    if state is JobState.WAITING:  # a document split into slices waits for them
        overrides.setdefault("slices", ("1-2", "3"))
    job_id = store.submissions.create(new_job(**overrides), dedup=False).job_id
    if state not in (JobState.QUEUED, JobState.WAITING):
        if state is JobState.CANCELLED:
            assert store.operations.cancel(job_id) is not None
        else:
            claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
            assert claimed is not None
            if state is JobState.SUCCEEDED:
                results = {fmt: f"# result {fmt}" for fmt in claimed.formats}
                assert store.attempts.finish(job_id, claimed.attempt, results)
            elif state is JobState.FAILED:
                assert store.attempts.fail(
                    job_id, claimed.attempt, ConversionFailed("bad document")
                )
            elif state is JobState.RETRYING:
                outcome = store.attempts.schedule_retry(
                    job_id, claimed.attempt, ServerUnavailable("HTTP 503"), delay=60.0
                )
                assert outcome is JobState.RETRYING
    job = store.reads.get_job(job_id)
    assert job is not None and job.state is state
    return job


def someone_waits_for_a_lock(url: str) -> bool:
    """Some session of the test's database waits for a lock (a row another transaction holds)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and row[0] > 0


def job_with_id(
    conn: psycopg.Connection,
    job_id: str,
    *,
    tenant: str = "default",
    submission_id: str | None = None,
) -> UUID:
    """A queued job whose id the test chose (to give two jobs ids that start alike), inserted
    as an operator would; its tenant must exist."""
    conn.execute(
        "INSERT INTO jobs (id, source_kind, source_uri, profile, formats, queue, tenant,"
        " submission_id) VALUES (%s, 'file', %s, 'auto', '{md}', 'doclane.small', %s, %s)",
        (job_id, f"/inbox/{job_id}.md", tenant, submission_id),
    )
    return UUID(job_id)


def drain_queue(store: JobStore, queue: str, worker: str, md: str) -> int:
    """Claim and finish ``queue``'s jobs as a worker would until a claim finds none it may
    take (and says so); how many were finished."""
    finished = 0
    while True:
        claim = store.attempts.claim_queue(queue, worker, lease_s=60)
        if claim.lead is None:
            assert claim.found is ClaimFound.EMPTY
            return finished
        assert store.attempts.finish(claim.lead.id, claim.lead.attempt, {"md": md})
        finished += 1
