"""What an attempt costs when it meets an open circuit, and what a cancelled one writes.

The processor against the fake server and a real PostgreSQL (no Celery), one attempt per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from uuid import UUID

from pipeline.jobs.model import EventKind, JobState
from pipeline.processing.outcomes import Outcome, OutcomeKind
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.processing import Bench

CONVERT = "convert_document_into_docling_document"


def test_an_open_circuit_after_a_try_that_reached_the_server_is_charged(
    make_bench: Callable[..., Bench],
) -> None:
    """Try 1 reaches the server (E302) and opens its circuit; try 2 finds every circuit open
    (E309). The attempt was spent on the server: it is charged, and still waits for the reset."""
    bench = make_bench(
        resilience={"retry_max_tries": 2, "breaker_fail_max": 1, "breaker_reset_s": 30}
    )
    bench.server.configure(fail_next=1, fail_with="http503")
    job_id = bench.submit_one(write_sample(bench.folder, "md", 40))

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.RETRY, "E309")
    assert outcome.attempt_spent
    assert outcome.countdown_s is not None and outcome.countdown_s >= 29
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.RETRYING
    assert (job.attempt, job.attempts_spent) == (1, 1)


def test_an_open_circuit_no_try_reached_is_refunded(make_bench: Callable[..., Bench]) -> None:
    resilience = {"retry_max_tries": 2, "breaker_fail_max": 1, "breaker_reset_s": 30}
    bench = make_bench(resilience=resilience)
    bench.server.configure(fail_next=1, fail_with="http503")
    tripping = bench.submit_one(write_sample(bench.folder, "md", 41))
    assert bench.take(tripping).code == "E309"  # E302, then open: charged
    job_id = bench.submit_one(write_sample(bench.folder, "md", 42))
    # another process, which has not met the open circuit yet (it shares it through Redis)
    other = make_bench(resilience=resilience)

    outcome = other.take(job_id)

    assert (outcome.kind, outcome.code, outcome.attempt_spent) == (OutcomeKind.RETRY, "E309", False)
    job = bench.store.reads.get_job(job_id)
    assert job is not None and (job.attempt, job.attempts_spent) == (1, 0)


def job_queue(bench: Bench, job_id: UUID) -> str:
    job = bench.store.reads.get_job(job_id)
    assert job is not None
    return job.queue


def test_a_process_that_met_every_circuit_open_claims_nothing_until_the_reset(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(
        resilience={"retry_max_tries": 2, "breaker_fail_max": 1, "breaker_reset_s": 30}
    )
    bench.server.configure(fail_next=1, fail_with="http503")
    tripping = bench.submit_one(write_sample(bench.folder, "md", 44))
    assert bench.take(tripping).code == "E309"  # E302, then open: charged
    job_id = bench.submit_one(write_sample(bench.folder, "md", 45))
    events_before = len(bench.store.reads.events(job_id))
    bench.publisher.messages.clear()

    drained = bench.processor.drain(job_queue(bench, job_id))

    assert (drained.jobs, drained.stopped) == (0, "circuits")
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.QUEUED
    assert (job.attempt, job.attempts_spent) == (0, 0), "not claimed"
    assert len(bench.store.reads.events(job_id)) == events_before, "no trail"
    [bell] = bench.publisher.messages
    assert bell.countdown_s is not None and bell.countdown_s > 10, "rung for after the reset"


def test_a_cancelled_attempt_withdraws_its_call_and_writes_nothing(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(processing={"cancel_check_s": 0.2})
    bench.server.configure(delay_s=600, delay_tools=[CONVERT])
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 43))
    outcomes: list[Outcome] = []
    worker = threading.Thread(target=lambda: outcomes.append(bench.take(job_id)))
    worker.start()
    wait_for(lambda: bench.server.stats()["tool_calls_in_flight"] == 1, message="converting")
    events_before = len(bench.store.reads.events(job_id))

    assert bench.store.operations.cancel(job_id) is not None
    worker.join(timeout=60)

    assert not worker.is_alive(), "the attempt did not stop"
    [outcome] = outcomes
    assert outcome.kind is OutcomeKind.LOST
    [withdrawn] = wait_for(lambda: bench.server.stats()["cancelled"], message="cancelled sent")
    assert "withdrawn" in withdrawn["reason"]
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert bench.store.reads.list_results(job_id) == []
    later = bench.store.reads.events(job_id)[events_before:]
    assert [(e.kind, e.to_state) for e in later] == [(EventKind.STATE_CHANGE, JobState.CANCELLED)]
    # The processor (and its client) go on: the next job converts.
    bench.server.configure(delay_s=0)
    next_id = bench.submit_one(write_sample(bench.folder, "md", 44))
    assert bench.take(next_id).kind is OutcomeKind.SUCCEEDED
