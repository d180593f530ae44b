"""The reconciler and tenants: paused or capped work waits for room, and nobody rings for it;
once there is room, the next pass rings its queue."""

from __future__ import annotations

import psycopg

from pipeline.jobs.model import Job, JobState
from pipeline.queues import RecordingPublisher
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.store.attempts import ClaimFound
from pipeline.store.store import JobStore
from tests.support.store_builders import job_in_state

QUEUE = "doclane.small"


def owned(store: JobStore, raw: psycopg.Connection, tenant: str, n: int) -> list[Job]:
    jobs = [job_in_state(store, JobState.QUEUED) for _ in range(n)]
    raw.execute("UPDATE jobs SET tenant = %s WHERE id = ANY(%s)",
                (tenant, [j.id for j in jobs]))  # fmt: skip
    return jobs


def test_a_paused_tenants_jobs_never_ring(store: JobStore, raw_sql: psycopg.Connection) -> None:
    raw_sql.execute("INSERT INTO tenants (name, max_running) VALUES ('p', 0)")
    owned(store, raw_sql, "p", 5)
    publisher = RecordingPublisher(depths={QUEUE: 0})
    for _ in range(3):
        assert reconcile_once(store, publisher).rung == {}
    assert publisher.messages == [], "a paused tenant costs no churn"
    raw_sql.execute("UPDATE tenants SET max_running = NULL WHERE name = 'p'")
    assert reconcile_once(store, publisher).rung == {QUEUE: 5}


def test_a_capped_tenants_queue_is_rung_once_there_is_room(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    raw_sql.execute("INSERT INTO tenants (name, max_running) VALUES ('c', 1)")
    owned(store, raw_sql, "c", 3)
    first = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert first.lead is not None
    assert store.attempts.claim_queue(QUEUE, "w", lease_s=60).found is ClaimFound.CAPPED
    publisher = RecordingPublisher(depths={QUEUE: 0})
    assert reconcile_once(store, publisher).rung == {}, "at its cap: nothing claimable"

    assert store.attempts.finish(first.lead.id, first.lead.attempt, {"md": "# done"})
    assert reconcile_once(store, publisher).rung == {QUEUE: 1}, "room for one: one bell"
