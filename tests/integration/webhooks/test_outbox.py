"""The outbox is written by the database with the final state, whoever makes the job final."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from pipeline.jobs.model import JobState
from pipeline.store.outbox import DeliveryState, WebhookOutbox
from pipeline.store.store import JobStore
from tests.support.store_builders import job_in_state, new_job

HOOK = "http://127.0.0.1:9/hook"


def outbox_rows(conn: psycopg.Connection, job_id: UUID) -> list[dict[str, Any]]:
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute("SELECT * FROM webhook_deliveries WHERE job_id = %s", (job_id,)).fetchall()


@pytest.mark.parametrize("state", [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])
def test_a_final_state_writes_one_event_for_a_job_with_a_webhook(
    store: JobStore, raw_sql: psycopg.Connection, state: JobState
) -> None:
    job = job_in_state(store, state, webhook_url=HOOK, formats=("md", "json"))
    [row] = outbox_rows(raw_sql, job.id)
    assert (row["url"], row["state"], row["attempts"]) == (HOOK, "pending", 0)
    event = row["event"]
    data = event["data"]
    assert event["type"] == f"job.{state.value}"
    assert data["job_id"] == str(job.id) and data["state"] == state.value
    assert {"created_at", "finished_at", "duration_s"} <= data.keys()
    if state is JobState.SUCCEEDED:
        assert data["results"] == [
            {"format": fmt, "path": f"/v1/jobs/{job.id}/result/{fmt}"} for fmt in ("json", "md")
        ]
    else:
        assert "results" not in data
    if state is JobState.FAILED:
        assert data["error"] == {"code": "E306", "message": "bad document"}
    else:
        assert "error" not in data


def test_no_webhook_no_event_and_no_event_before_the_end(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    plain = job_in_state(store, JobState.SUCCEEDED)
    waiting = job_in_state(store, JobState.RETRYING, webhook_url=HOOK)
    assert outbox_rows(raw_sql, plain.id) == []
    assert outbox_rows(raw_sql, waiting.id) == []


def test_a_final_state_rolled_back_leaves_no_event(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    job = job_in_state(store, JobState.RUNNING, webhook_url=HOOK)
    with pytest.raises(psycopg.errors.RaiseException), raw_sql.transaction():
        raw_sql.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", (job.id,))
        raw_sql.execute("DO $$ BEGIN RAISE EXCEPTION 'undone'; END $$")
    assert outbox_rows(raw_sql, job.id) == []
    assert store.reads.get_job(job.id).state is JobState.RUNNING  # type: ignore[union-attr]


def test_the_reconciler_failing_a_lost_last_attempt_writes_the_event(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    job_id = store.submissions.create(new_job(webhook_url=HOOK, max_attempts=1), dedup=False).job_id
    assert store.attempts.claim(job_id, "worker-a", lease_s=60) is not None
    later = store.reads.get_job(job_id).lease_expires_at + timedelta(seconds=1)  # type: ignore[union-attr, operator]
    expired = store.operations.requeue_expired_leases(now=later)
    assert expired.failed == (job_id,)
    [row] = outbox_rows(raw_sql, job_id)
    assert row["event"]["data"]["error"]["code"] == "E303"


def test_the_webhook_url_is_never_dumped_or_printed(store: JobStore) -> None:
    job = job_in_state(store, JobState.QUEUED, webhook_url=HOOK + "?token=s3cret")
    assert job.webhook_url == HOOK + "?token=s3cret"
    assert "s3cret" not in repr(job) and "webhook_url" not in job.model_dump(mode="json")


def test_a_claim_is_one_senders_until_it_lapses(store: JobStore) -> None:
    outbox = WebhookOutbox(store.pool)
    job = job_in_state(store, JobState.SUCCEEDED, webhook_url=HOOK)
    first = outbox.claim(claim_s=60)
    assert first is not None and first.job_id == job.id and first.attempts == 1
    assert outbox.claim(claim_s=60) is None  # held: nobody else sends it

    # A lapsed claim (its sender died) is taken over; the first sender's report is fenced off.
    with store.pool.connection("test") as conn:
        conn.execute(
            "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = %s", (first.id,)
        )
    second = outbox.claim(claim_s=60)
    assert second is not None and second.id == first.id and second.attempts == 2
    assert not outbox.delivered(first, status=200)
    assert outbox.delivered(second, status=200)
    assert outbox.counts().pending == 0


def test_failed_then_dead_then_revived(store: JobStore) -> None:
    outbox = WebhookOutbox(store.pool)
    job_in_state(store, JobState.SUCCEEDED, webhook_url=HOOK)
    claimed = outbox.claim(claim_s=60)
    assert claimed is not None
    state = outbox.failed(claimed, error="503", status=503, delay_s=3600, give_up_s=86400)
    assert state is DeliveryState.PENDING
    counts = outbox.counts()
    assert (counts.pending, counts.failed, counts.dead) == (0, 1, 0)
    assert outbox.claim(claim_s=60) is None  # not due for an hour

    assert outbox.revive(DeliveryState.PENDING) == [claimed.id]  # "retry now"
    again = outbox.claim(claim_s=60)
    assert again is not None and again.attempts == 2
    state = outbox.failed(again, error="503", status=503, delay_s=10, give_up_s=5)
    assert state is DeliveryState.DEAD
    [dead] = outbox.listing(DeliveryState.DEAD)
    assert (dead.id, dead.last_status, dead.last_error) == (claimed.id, 503, "503")

    assert outbox.revive(DeliveryState.DEAD) == [claimed.id]
    assert outbox.counts().failed == 1
    assert outbox.claim(claim_s=60) is not None
