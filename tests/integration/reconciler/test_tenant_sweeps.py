"""The reconciler and tenants (migration 0020): paused or capped work waits for room, not for
a message; owed messages are repaid on every pass and counted as messages."""

from __future__ import annotations

import psycopg

from pipeline.jobs import Job, JobState
from pipeline.queues import RecordingPublisher
from pipeline.reconciler import reconcile_once
from pipeline.settings import read_settings
from pipeline.store import JobStore
from tests.fixtures.waiting import wait_for
from tests.integration.store.builders import job_in_state

QUEUE = "doclane.small"
QUICK = dict(reconcile_stale_after_s=0.001, reconcile_lost_after_s=0.001)


def owned(store: JobStore, raw: psycopg.Connection, tenant: str, n: int) -> list[Job]:
    jobs = [job_in_state(store, JobState.QUEUED) for _ in range(n)]
    raw.execute("UPDATE jobs SET tenant = %s, updated_at = now() - interval '1 hour' "
                "WHERE id = ANY(%s)", (tenant, [j.id for j in jobs]))  # fmt: skip
    return jobs


def test_a_paused_tenants_jobs_are_never_republished(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    raw_sql.execute("INSERT INTO tenants (name, max_running) VALUES ('p', 0)")
    paused = {j.id for j in owned(store, raw_sql, "p", 5)}
    control = owned(store, raw_sql, "default", 1)[0]
    publisher = RecordingPublisher(depths={QUEUE: 0})
    settings = read_settings(reconcile=QUICK).reconcile

    wait_for(
        lambda: control.id in reconcile_once(store, publisher, settings).republished,
        timeout=10,
        message="the default tenant's job whose message was lost, republished",
    )
    reconcile_once(store, publisher, settings)
    assert not paused & {m.job_id for m in publisher.messages}, "a paused tenant costs no churn"


def test_owed_messages_count_as_messages_and_are_repaid_once_there_is_room(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    raw_sql.execute("INSERT INTO tenants (name, max_running) VALUES ('c', 1)")
    jobs = owned(store, raw_sql, "c", 3)
    first = store.attempts.claim_next(jobs[0].id, "w", lease_s=60)
    assert first.lead is not None
    for job in jobs[1:]:  # the other two messages find the tenant at its cap: owed
        assert store.attempts.claim_next(job.id, "w", lease_s=60).found == "capped"
    assert store.operations.owed_by_queue() == {QUEUE: 2}
    publisher = RecordingPublisher(depths={QUEUE: 0})
    # the lost-message sweeps wait an hour: only the repayment acts
    settings = read_settings(
        reconcile=dict(reconcile_stale_after_s=3600, reconcile_lost_after_s=3600)
    ).reconcile
    report = reconcile_once(store, publisher, settings)
    assert (report.repaid, report.lost, publisher.messages) == (0, [], [])

    assert store.attempts.finish(first.lead.id, first.lead.attempt, {"md": "# done"})
    report = reconcile_once(store, publisher, settings)
    assert report.repaid == 1, "room for one: one owed message repaid"
    assert store.operations.owed_by_queue() == {QUEUE: 1}
    assert len(publisher.messages) == 1 and publisher.messages[0].job_id in {j.id for j in jobs}
