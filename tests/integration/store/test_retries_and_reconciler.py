"""Retries (charged and uncharged), expired leases and jobs whose message was lost."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from errors import CircuitOpen, InternalError, ServerUnavailable
from pipeline.jobs.model import Job, JobState
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job


def test_a_retry_is_due_after_its_delay_and_keeps_the_error(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING)
    error = ServerUnavailable("HTTP 503", http_status=503)
    assert store.attempts.schedule_retry(job.id, job.attempt, error, delay=30) is JobState.RETRYING
    after = store.reads.get_job(job.id)
    assert after is not None and after.next_attempt_at is not None
    assert after.next_attempt_at - after.updated_at == timedelta(seconds=30)
    assert (after.error_code, after.error_message) == ("E302", "HTTP 503")
    assert after.error_detail == {"http_status": 503}
    assert after.lease_owner is None and after.attempts_spent == 1


def test_the_last_charged_attempt_fails_the_job_instead(store: JobStore) -> None:
    job_id = store.submissions.create(new_job(max_attempts=2)).job_id
    for attempt in (1, 2):
        claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
        assert claimed is not None and claimed.attempt == attempt
        outcome = store.attempts.schedule_retry(job_id, attempt, InternalError("boom"), delay=0)
        assert outcome is (JobState.RETRYING if attempt == 1 else JobState.FAILED)
    final = store.reads.get_job(job_id)
    assert final is not None
    assert (final.state, final.error_code, final.next_attempt_at) == (JobState.FAILED, "E204", None)


def test_an_open_circuit_does_not_spend_attempts(store: JobStore) -> None:
    """Ten breaker deferrals of a one-attempt job: it stays retryable, and each claim still
    gets a fresh fencing number."""
    job_id = store.submissions.create(new_job(max_attempts=1)).job_id
    for attempt in range(1, 11):
        claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
        assert claimed is not None
        assert (claimed.attempt, claimed.attempts_spent) == (attempt, 1)
        outcome = store.attempts.schedule_retry(
            job_id, attempt, CircuitOpen("open", retry_after=0), delay=0, spend_attempt=False
        )
        assert outcome is JobState.RETRYING
    job = store.reads.get_job(job_id)
    assert job is not None and (job.attempt, job.attempts_spent, job.attempts_left) == (10, 0, 1)
    deferrals = [e for e in store.reads.events(job_id) if e.to_state is JobState.RETRYING]
    assert len(deferrals) == 10
    assert deferrals[0].detail is not None
    assert deferrals[0].detail["reason"] == "E309: retry without charging an attempt"


def test_expired_leases_are_requeued_or_failed_when_out_of_attempts(store: JobStore) -> None:
    lost = store.submissions.create(new_job(max_attempts=3)).job_id
    last_try = store.submissions.create(new_job(max_attempts=1)).job_id
    alive = store.submissions.create(new_job()).job_id
    claims = {
        job_id: store.attempts.claim(job_id, "worker-a", lease_s=lease)
        for job_id, lease in ((lost, 10), (last_try, 10), (alive, 3600))
    }
    lease_end = claims[lost].lease_expires_at if claims[lost] else None
    assert lease_end is not None

    assert (
        store.operations.requeue_expired_leases(now=lease_end - timedelta(seconds=1)).requeued == ()
    )
    swept = store.operations.requeue_expired_leases(now=lease_end + timedelta(seconds=60))
    assert swept.requeued == (lost,)
    assert swept.failed == (last_try,)

    requeued, failed, running = store.reads.get_jobs([lost, last_try, alive])
    assert requeued.state is JobState.QUEUED and requeued.lease_owner is None
    assert (failed.state, failed.error_code) == (JobState.FAILED, "E303")
    assert running.state is JobState.RUNNING
    assert store.reads.events(lost)[-1].detail == {
        "reason": "lease expired",
        "worker": "worker-a",
        "attempts_spent": 1,
        "max_attempts": 3,
    }
    # the next sweep finds nothing more to do
    later = store.operations.requeue_expired_leases(now=lease_end + timedelta(seconds=60))
    assert later.requeued == () and later.failed == ()
