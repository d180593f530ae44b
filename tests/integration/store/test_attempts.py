"""Claims and the writes they guard: one winner per claim, and a stale attempt writes nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import psycopg
import pytest
from psycopg import errors as pg_errors

from errors import CallTimeout, ConversionFailed
from pipeline.jobs.model import EventKind, Job, JobState, Stage
from pipeline.store.attempts import ClaimFound
from pipeline.store.finishing import INLINE_RESULTS_MAX_CHARS
from pipeline.store.refusals import ResultFormatsRefused
from pipeline.store.rows import AttemptResults
from pipeline.store.store import JobStore


def test_a_claim_starts_a_new_attempt_with_a_lease(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.QUEUED)
    claimed = store.attempts.claim(job.id, "worker-a", lease_s=60)
    assert claimed is not None
    assert (claimed.state, claimed.attempt, claimed.attempts_spent) == (JobState.RUNNING, 1, 1)
    assert claimed.lease_owner == "worker-a"
    assert claimed.lease_expires_at is not None and claimed.started_at is not None
    assert claimed.lease_expires_at > claimed.started_at


@pytest.mark.parametrize(
    "state", [JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]
)
def test_nothing_to_claim_unless_queued_or_retrying(
    job_factory: Callable[..., Job], store: JobStore, state: JobState
) -> None:
    job = job_factory(state)
    assert store.attempts.claim(job.id, "worker-b", lease_s=60) is None
    assert store.reads.get_job(job.id) == job


def test_a_retrying_job_can_be_claimed_again(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RETRYING)
    assert store.attempts.claim(job.id, "worker-b", lease_s=60) is None, "not before its due time"
    assert store.operations.make_due(job.id)
    claimed = store.attempts.claim(job.id, "worker-b", lease_s=60)
    assert claimed is not None and claimed.attempt == job.attempt + 1
    assert claimed.next_attempt_at is None
    assert claimed.started_at == job.started_at  # the job's first start is kept


def test_the_claim_says_what_it_found_as_a_value(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    """A drain's claim: one statement whether it claims or finds nothing; a running job is
    not claimable, nor a retrying one before its due time."""
    running, waiting, queued = (job_factory(s) for s in (JobState.RUNNING, JobState.RETRYING,
                                                         JobState.QUEUED))  # fmt: skip
    taken = store.attempts.claim_queue(queued.queue, "worker-a", lease_s=60)
    assert taken.lead is not None and (taken.lead.id, taken.lead.attempt) == (queued.id, 1)
    assert (taken.found, taken.companions) == (ClaimFound.CLAIMED, [])
    nothing = store.attempts.claim_queue(queued.queue, "worker-a", lease_s=60)
    assert (nothing.lead, nothing.found, nothing.companions) == (None, ClaimFound.EMPTY, [])
    assert store.reads.get_job(running.id) == running
    assert store.reads.get_job(waiting.id) == waiting, "a job not due is not claimed"


def test_concurrent_claims_have_exactly_one_winner(
    make_store: Callable[[], JobStore], store: JobStore, job_factory: Callable[..., Job]
) -> None:
    """Four workers (each its own pool, like separate processes) race for the same jobs."""
    workers = [make_store() for _ in range(4)]
    jobs = [job_factory(JobState.QUEUED) for _ in range(25)]
    barrier = threading.Barrier(len(workers))

    def race(index: int) -> list[Job | None]:
        won = []
        for job in jobs:
            barrier.wait()
            won.append(workers[index].attempts.claim(job.id, f"worker-{index}", lease_s=60))
        return won

    with ThreadPoolExecutor(len(workers)) as pool:
        outcomes = list(pool.map(race, range(len(workers))))

    for position, job in enumerate(jobs):
        winners = [o[position] for o in outcomes if o[position] is not None]
        assert len(winners) == 1, f"job {job.id}: {len(winners)} winners"
        final = store.reads.get_job(job.id)
        assert final is not None and final.attempt == 1
        assert final.lease_owner == winners[0].lease_owner


def test_a_stale_attempt_can_neither_finish_nor_fail_nor_retry(
    make_store: Callable[[], JobStore], store: JobStore, job_factory: Callable[..., Job]
) -> None:
    """Worker A's lease expires, B claims the job again; A wakes up and tries every write."""
    worker_a, worker_b = make_store(), make_store()
    job = job_factory(JobState.QUEUED)
    first = worker_a.attempts.claim(job.id, "worker-a", lease_s=60)
    assert first is not None
    assert first.lease_expires_at is not None
    swept = store.operations.requeue_expired_leases(
        now=first.lease_expires_at + timedelta(seconds=1)
    )
    assert swept.requeued == (job.id,)
    second = worker_b.attempts.claim(job.id, "worker-b", lease_s=60)
    assert second is not None and second.attempt == first.attempt + 1

    stale = first.attempt
    assert worker_a.attempts.finish(job.id, stale, {"md": "# from the stale attempt"}) is False
    assert worker_a.attempts.fail(job.id, stale, ConversionFailed("late")) is False
    retry = worker_a.attempts.schedule_retry(job.id, stale, CallTimeout("late"), delay=1.0)
    assert retry is None
    assert worker_a.attempts.set_stage(job.id, stale, Stage.EXPORTING) is False
    assert worker_a.attempts.renew_lease(job.id, stale, 60) is False
    assert store.reads.list_results(job.id) == []
    assert store.reads.get_job(job.id) == second

    assert (
        worker_b.attempts.finish(job.id, second.attempt, {"md": "# from the live attempt"}) is True
    )
    assert store.reads.get_result(job.id, "md") == "# from the live attempt"


def test_a_duplicate_finish_writes_nothing(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING, formats=("md", "json"))
    assert store.attempts.finish(job.id, job.attempt, {"md": "# one", "json": "{}"}) is True
    assert store.attempts.finish(job.id, job.attempt, {"md": "# two", "json": "[]"}) is False
    assert store.reads.get_result(job.id, "md") == "# one"
    assert [r.format for r in store.reads.list_results(job.id)] == ["json", "md"]
    assert all(r.attempt == job.attempt for r in store.reads.list_results(job.id))


def test_a_round_is_finished_together_each_under_its_own_fence(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    """``finish_together``: one transaction for a round's results; a job no longer its attempt's
    (here cancelled) gets nothing but its calls and note, the others are stored."""
    kept, gone, large = (job_factory(JobState.RUNNING) for _ in range(3))
    assert store.operations.cancel(gone.id) is not None
    big = "x" * (INLINE_RESULTS_MAX_CHARS + 1)  # stored by COPY, alone, as finish() does
    ends = [
        AttemptResults(kept.id, kept.attempt, {"md": "# kept"}, note={"note": "converted"}),
        AttemptResults(gone.id, gone.attempt, {"md": "# gone"}, note={"note": "converted"}),
        AttemptResults(large.id, large.attempt, {"md": big}),
    ]
    assert store.attempts.finish_together(ends) == [True, False, True]
    assert store.reads.get_result(kept.id, "md") == "# kept"
    assert store.reads.get_result(large.id, "md") == big
    assert store.reads.list_results(gone.id) == []
    assert [e.detail for e in store.reads.events(gone.id) if e.kind is EventKind.NOTE] == [
        {"note": "converted"}
    ], "the note of what happened is kept, as finish() keeps it"
    assert store.attempts.finish_together(ends[:1]) == [False], "a duplicate writes nothing"


def test_a_growing_round_stores_and_claims_more_in_one_transaction(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    """``finish_then_claim``: the stored results and the next jobs like them commit together
    (one ``now()``); each result under its own fence, the claim as ``claim_round``'s."""
    done, gone = job_factory(JobState.RUNNING), job_factory(JobState.RUNNING)
    assert store.operations.cancel(gone.id) is not None
    waiting = [job_factory(JobState.QUEUED) for _ in range(3)]
    ends = [
        AttemptResults(done.id, done.attempt, {"md": "# done"}),
        AttemptResults(gone.id, gone.attempt, {"md": "# gone"}),
    ]

    stored, more = store.attempts.finish_then_claim(
        ends, done, "worker-b", 60, limit=2, small_below=1 << 20
    )

    assert stored == [True, False]
    assert [j.id for j in more] == [w.id for w in waiting[:2]], "by priority, then age"
    assert {(j.state, j.attempt, j.lease_owner) for j in more} == {
        (JobState.RUNNING, 1, "worker-b")
    }
    finished = store.reads.get_job(done.id)
    assert finished is not None and finished.finished_at == more[0].started_at, "one commit"
    assert store.reads.list_results(gone.id) == []
    third = store.reads.get_job(waiting[2].id)
    assert third is not None and third.state is JobState.QUEUED, "at most the limit"


def test_a_round_with_results_that_are_not_a_jobs_formats_stores_nothing(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    first, second = job_factory(JobState.RUNNING), job_factory(JobState.RUNNING)
    ends = [
        AttemptResults(first.id, first.attempt, {"md": "# fine"}),
        AttemptResults(second.id, second.attempt, {"html": "<p>not asked for</p>"}),
    ]
    with pytest.raises(ResultFormatsRefused, match="wants formats"):
        store.attempts.finish_together(ends)
    assert store.reads.get_job(first.id) == first, "the whole transaction was undone"
    assert store.reads.list_results(first.id) == []
    queued = job_factory(JobState.QUEUED)
    with pytest.raises(ResultFormatsRefused, match="wants formats"):
        store.attempts.finish_then_claim(ends, first, "worker-b", 60, limit=1, small_below=1 << 20)
    assert store.reads.get_job(first.id) == first and store.reads.get_job(queued.id) == queued, (
        "the claim was undone with the results"
    )


def test_a_cancelled_running_job_is_never_written_as_succeeded(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING)
    cancellation = store.operations.cancel(job.id, reason="cancelled by an operator")
    assert cancellation is not None
    assert cancellation.previous_state is JobState.RUNNING
    assert cancellation.job.state is JobState.CANCELLED
    assert store.attempts.finish(job.id, job.attempt, {"md": "# too late"}) is False
    assert store.reads.list_results(job.id) == []
    assert store.reads.events(job.id)[-1].detail == {
        "reason": "cancelled by an operator",
        "worker": "worker-a",
        "attempts_spent": 1,
        "max_attempts": 3,
    }


@pytest.mark.parametrize("state", [JobState.QUEUED, JobState.RETRYING])
def test_cancel_stops_a_waiting_job(
    job_factory: Callable[..., Job], store: JobStore, state: JobState
) -> None:
    job = job_factory(state)
    cancellation = store.operations.cancel(job.id)
    assert cancellation is not None and cancellation.previous_state is state
    assert store.attempts.claim(job.id, "worker-b", lease_s=60) is None


@pytest.mark.parametrize("state", [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])
def test_cancel_leaves_a_finished_job_alone(
    job_factory: Callable[..., Job], store: JobStore, state: JobState
) -> None:
    job = job_factory(state)
    assert store.operations.cancel(job.id) is None
    assert store.reads.get_job(job.id) == job


def test_finish_with_the_wrong_formats_writes_nothing(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING, formats=("md", "json"))
    with pytest.raises(ResultFormatsRefused, match="wants formats"):
        store.attempts.finish(job.id, job.attempt, {"md": "# only markdown"})
    after = store.reads.get_job(job.id)
    assert after is not None and after.state is JobState.RUNNING
    assert store.reads.list_results(job.id) == []


def test_results_cannot_be_inserted_outside_the_finishing_transaction(
    job_factory: Callable[..., Job], raw_sql: psycopg.Connection
) -> None:
    running = job_factory(JobState.RUNNING)
    succeeded = job_factory(JobState.SUCCEEDED)
    insert = "INSERT INTO results (job_id, format, attempt, content) VALUES (%s, 'html', %s, 'x')"
    for job in (running, succeeded):
        with pytest.raises(pg_errors.CheckViolation, match="may only be stored"):
            raw_sql.execute(insert, (job.id, job.attempt))
    with pytest.raises(pg_errors.CheckViolation, match="immutable"):
        raw_sql.execute("UPDATE results SET content = 'changed' WHERE job_id = %s", (succeeded.id,))


def test_results_can_be_written_by_hand_in_the_transaction_that_finishes_the_job(
    job_factory: Callable[..., Job], store: JobStore, raw_sql: psycopg.Connection
) -> None:
    """The database's rule, not the store's: psql can finish a job too, if it does it right."""
    job = job_factory(JobState.RUNNING)
    with raw_sql.transaction():
        raw_sql.execute("UPDATE jobs SET state = 'succeeded' WHERE id = %s", (job.id,))
        raw_sql.execute(
            "INSERT INTO results (job_id, format, attempt, content) VALUES (%s, 'md', %s, 'x')",
            (job.id, job.attempt),
        )
    assert store.reads.get_result(job.id, "md") == "x"


def test_stage_and_origin_are_recorded_for_the_running_attempt(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING)
    assert store.attempts.set_stage(
        job.id, job.attempt, Stage.CONVERTING, origin="http://docling:8000"
    )
    assert store.attempts.set_stage(job.id, job.attempt, Stage.EXPORTING)
    assert store.attempts.record_source(job.id, job.attempt, size_bytes=42, content_sha256="a" * 64)
    after = store.reads.get_job(job.id)
    assert after is not None
    assert (after.stage, after.server_origin) == (Stage.EXPORTING, "http://docling:8000")
    assert (after.size_bytes, after.content_sha256) == (42, "a" * 64)
    assert store.attempts.renew_lease(job.id, job.attempt, 600)
    renewed = store.reads.get_job(job.id)
    assert renewed is not None and renewed.lease_expires_at is not None
    assert after.lease_expires_at is not None
    assert renewed.lease_expires_at > after.lease_expires_at
