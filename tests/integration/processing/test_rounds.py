"""Rounds: many small jobs of one process in flight at once, each still its own job.

In process against the fake server and a real PostgreSQL; the process's round threads are real,
and the fake counts the calls it holds at once. Batches are off (``batch_max_docs`` 1) so that
every small job leads or joins a round.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from errors import ServerUnavailable
from pipeline.jobs.model import JobState, Stage
from pipeline.mcp.client import McpClient
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.profiles.base import Conversion
from pipeline.store.attempts import ClaimFound
from pipeline.support.logs import current_job_context
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.processing import (
    Bench,
    assert_succeeded_once,
    retry_bells,
    submit_samples,
)

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


def round_bench(make_bench: Callable[..., Bench], **processing: Any) -> Bench:
    return make_bench(
        batches=True,
        processing={"batch_max_docs": 1, "round_max_docs": 8, "server_concurrency": 2,
                    **processing},
    )  # fmt: skip


def job_of_this_thread() -> UUID:
    """The job whose unit runs on the calling thread (a round thread names its job)."""
    context = current_job_context()
    assert context is not None, "a round's unit runs inside its job's log context"
    return UUID(context.job_id)


def assert_only_one_cancelled(bench: Bench, ids: list[UUID], cancelled: UUID) -> None:
    """``cancelled`` is cancelled with nothing stored; every other job succeeded once."""
    job = bench.store.reads.get_job(cancelled)
    assert job is not None and job.state is JobState.CANCELLED
    assert bench.store.reads.list_results(cancelled) == []
    assert_others_succeeded(bench, ids, cancelled)


def assert_others_succeeded(bench: Bench, ids: list[UUID], but: UUID) -> None:
    for number, job_id in enumerate(ids, start=1):
        if job_id != but:
            assert_succeeded_once(bench, job_id, number)


def hanging_job(bench: Bench, ids: list[UUID]) -> UUID | None:
    """The one job whose call hangs, once every other job of the round is converted (stored
    already, or waiting for its group's commit)."""
    jobs = bench.store.reads.get_jobs(ids)
    stuck = [j.id for j in jobs if j.state is JobState.RUNNING and j.stage is Stage.CONVERTING]
    others = [j for j in jobs if j.id not in stuck]
    done = all(j.stage is Stage.EXPORTING or j.state is JobState.SUCCEEDED for j in others)
    return stuck[0] if len(stuck) == 1 and done else None


def most_held_at_once(bench: Bench, ids: list[UUID]) -> int:
    """The most of these jobs claimed and not yet stored at any one time, by the database's
    clock (a claim's and a commit's ``now()``: one process's round claims after it stores)."""
    jobs = bench.store.reads.get_jobs(ids)
    spans = [(j.started_at, j.finished_at) for j in jobs]
    assert all(start is not None and end is not None for start, end in spans)
    return max(
        sum(1 for start, end in spans if start <= at < end)  # type: ignore[operator]
        for at, _ in spans
    )


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def test_a_round_claims_its_jobs_at_once_and_converts_them_concurrently(
    make_bench: Callable[..., Bench],
) -> None:
    bench = round_bench(make_bench)
    ids = submit_samples(bench, 8)
    # Two units must be inside at once for either to go on: without concurrency, this fails.
    inside = threading.Barrier(2, timeout=30)
    first_two: list[UUID] = []
    lock = threading.Lock()

    def meet_another() -> None:
        with lock:
            first_two.append(job_of_this_thread())
            mine = len(first_two)
        if mine <= 2:
            inside.wait()

    bench.runner.after_unit = meet_another

    outcome = bench.take(ids[0])

    assert (outcome.kind, outcome.job_id) == (OutcomeKind.SUCCEEDED, ids[0])
    for number, job_id in enumerate(ids, start=1):
        assert_succeeded_once(bench, job_id, number)
    stats = bench.server.stats()
    assert stats["max_tool_calls_in_flight"] <= 2, "never more than DOCLANE_SERVER_CONCURRENCY"
    jobs = {j.id: j for j in bench.store.reads.get_jobs(ids)}
    claims = {jobs[i].started_at for i in ids}
    assert len(claims) == 1, "the job and its companions claimed in one statement"
    assert bench.publisher.messages == [], "nothing to publish: every companion succeeded"
    # The companions' own messages find nothing to claim.
    assert bench.take(ids[1]).kind is OutcomeKind.SKIPPED


def test_a_round_claims_more_as_room_frees_never_holding_more_than_its_room(
    make_bench: Callable[..., Bench],
) -> None:
    """A round of room 3 takes all seven jobs like its lead, never more than three claimed
    and unstored at once, and leaves the job of other formats to a claim after it."""
    bench = round_bench(make_bench, round_max_docs=3, round_max_s=600)
    ids = submit_samples(bench, 7)
    other = submit_samples_from(bench, 20, formats=("md", "html"))

    assert bench.processor.drain("doclane.small").stopped == "empty"

    for number, job_id in enumerate(ids, start=1):
        assert_succeeded_once(bench, job_id, number)
    assert most_held_at_once(bench, ids) <= 3
    claims = {j.started_at for j in bench.store.reads.get_jobs(ids)}
    assert len(claims) >= 3, "seven jobs at most three at a time: three claims at least"
    # the round leaves the job of other formats alone; the drain's next claim takes it
    other_job = bench.store.reads.get_job(other)
    assert other_job is not None and other_job.started_at is not None
    round_jobs = bench.store.reads.get_jobs(ids)
    assert all(j.finished_at and j.finished_at <= other_job.started_at for j in round_jobs)


def test_a_message_whose_job_is_taken_starts_a_round_of_the_jobs_like_it(
    make_bench: Callable[..., Bench],
) -> None:
    """The message's job runs elsewhere: the message is a claim right on its queue, so it
    takes the next job and the jobs like it that are due, converts them, and leaves the job
    it names to the worker that holds it."""
    bench = round_bench(make_bench)
    ids = submit_samples(bench, 4)
    elsewhere = bench.store.attempts.claim(ids[0], "another-worker", lease_s=60)
    assert elsewhere is not None

    outcome = bench.take(ids[0])

    assert outcome.kind is OutcomeKind.SUCCEEDED and outcome.job_id in ids[1:]
    held = bench.store.reads.get_job(ids[0])
    assert held is not None and held.state is JobState.RUNNING and held.attempt == 1
    assert bench.store.reads.list_results(ids[0]) == []
    assert_others_succeeded(bench, ids, ids[0])
    assert retry_bells(bench) == []
    # three jobs taken for a message that stood for eight: a message goes on for the rest


def test_a_round_takes_only_jobs_that_can_share_it(make_bench: Callable[..., Bench]) -> None:
    """Same formats only, never a job tried before, at most DOCLANE_ROUND_MAX_DOCS (a round
    that does not grow: ``DOCLANE_ROUND_MAX_S`` 0)."""
    bench = round_bench(make_bench, round_max_docs=3, round_max_s=0)
    ids = submit_samples(bench, 4)
    other = submit_samples_from(bench, 20, formats=("md", "html"))
    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    states = {j.id: j.state for j in bench.store.reads.get_jobs([*ids, other])}
    assert states[ids[0]] is JobState.SUCCEEDED, "the message's own job leads its round"
    # one submission's jobs are equally old: which two join the lead is the lanes' choice
    assert sorted(states[i] for i in ids) == sorted([JobState.SUCCEEDED] * 3 + [JobState.QUEUED])
    assert states[other] is JobState.QUEUED, "other formats never share a round"


def submit_samples_from(bench: Bench, number: int, *, formats: tuple[str, ...]) -> UUID:
    return bench.submit_one(write_sample(bench.folder, "md", number), formats=formats)


def test_a_failure_in_a_round_is_only_its_own_job(make_bench: Callable[..., Bench]) -> None:
    """The server cannot read one document (gone after the worker checked it): that job fails
    with the server's error; the others are stored as if it were not there."""
    bench = round_bench(make_bench)
    ids = submit_samples(bench, 6)
    broken = ids[2]
    path = Path(bench.store.reads.get_job(broken).source_uri)  # type: ignore[union-attr]

    def lose_its_file(client: McpClient) -> McpClient:
        if job_of_this_thread() == broken:
            path.unlink(missing_ok=True)
        return client

    bench.runner.wrap_client = lose_its_file

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    failed = bench.store.reads.get_job(broken)
    assert failed is not None and failed.state is JobState.FAILED and failed.error_code == "E306"
    assert bench.store.reads.list_results(broken) == []
    assert_others_succeeded(bench, ids, broken)
    assert retry_bells(bench) == [], "a final failure needs no next message"


def test_results_not_of_their_jobs_formats_fail_only_their_job(
    make_bench: Callable[..., Bench],
) -> None:
    """The database refuses a round's commit when one job's results are not its formats (a bug,
    SQLSTATE DL001): the round stores each job alone to find whose, and only that job fails."""
    bench = round_bench(make_bench)
    ids = submit_samples(bench, 4)
    wrong = ids[1]

    def html_for_one(conversion: Conversion) -> Conversion:
        if job_of_this_thread() == wrong:
            conversion.outputs = {"html": conversion.outputs["md"]}
        return conversion

    bench.runner.alter_result = html_for_one

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    failed = bench.store.reads.get_job(wrong)
    assert failed is not None and failed.state is JobState.FAILED, failed
    assert bench.store.reads.list_results(wrong) == []
    assert_others_succeeded(bench, ids, wrong)


def test_a_retryable_failure_in_a_round_gets_its_own_next_message(
    make_bench: Callable[..., Bench],
) -> None:
    """One job's server trouble (E302, retryable) is charged to it alone, and its next attempt
    gets a bell of its own, rung when it is due; the others are stored."""
    bench = make_bench(
        batches=True,
        processing={
            "batch_max_docs": 1,
            "round_max_docs": 8,
            "server_concurrency": 2,
            "job_retry_base_s": 600,  # not due while the test looks
        },
        resilience={"retry_max_tries": 1, "breaker_fail_max": 100},
    )
    ids = submit_samples(bench, 4)
    unlucky = ids[1]

    def trouble_for_one(client: McpClient) -> McpClient:
        if job_of_this_thread() == unlucky:
            raise ServerUnavailable("the server went away during this document")
        return client

    bench.runner.wrap_client = trouble_for_one

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    job = bench.store.reads.get_job(unlucky)
    assert job is not None and job.state is JobState.RETRYING and job.error_code == "E302"
    assert job.attempts_spent == 1, "charged: it was its own try"
    assert len(retry_bells(bench)) == 1
    assert_others_succeeded(bench, ids, unlucky)
    # Before it is due a claim takes nothing: not it, and none of the stored others again.
    assert bench.processor.claim(job.queue) is ClaimFound.EMPTY
    still = bench.store.reads.get_job(unlucky)
    assert still is not None and still.state is JobState.RETRYING


def test_a_job_cancelled_mid_round_stops_alone(
    make_bench: Callable[..., Bench], background: ThreadPoolExecutor
) -> None:
    """A cancel reaches only its own job's call: the cancelled job's call is withdrawn and
    nothing is written for it; the round's other jobs are stored."""
    bench = round_bench(make_bench, cancel_check_s=0.2, server_concurrency=3)
    ids = submit_samples(bench, 4)
    # The round's first convert hangs until it is withdrawn; every other call answers at once.
    bench.server.configure(fail_next=1, fail_with="hang", fail_tools=[CONVERT])
    running: Future[Outcome] = background.submit(bench.take, ids[0])

    hanging = wait_for(lambda: hanging_job(bench, ids), timeout=30, message="a call hanging")
    assert bench.store.operations.cancel(hanging) is not None
    outcome = running.result(timeout=60)

    assert len(bench.server.stats()["cancelled"]) == 1, "its call, and only its, withdrawn"
    assert_only_one_cancelled(bench, ids, hanging)
    expected = OutcomeKind.LOST if hanging == ids[0] else OutcomeKind.SUCCEEDED
    assert outcome.kind is expected


def test_a_job_cancelled_after_its_conversion_is_fenced_out_of_the_round_commit(
    make_bench: Callable[..., Bench],
) -> None:
    """Cancelled between its conversion and the round's commit (too late for its keeper to
    notice): the one transaction stores the others, and its fence keeps its results out."""
    bench = round_bench(make_bench)
    ids = submit_samples(bench, 5)
    victim = ids[3]

    def cancel_the_victim() -> None:
        if job_of_this_thread() == victim:
            assert bench.store.operations.cancel(victim) is not None

    bench.runner.after_unit = cancel_the_victim

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    assert_only_one_cancelled(bench, ids, victim)


class DeadlineReached(Exception):
    """What a task's soft time limit raises in the thread that waits for the round."""


def test_a_round_at_its_time_limit_stores_what_is_converted(
    make_bench: Callable[..., Bench], background: ThreadPoolExecutor
) -> None:
    """The soft time limit interrupts the thread waiting for the round (as Celery's signal
    does): the call still in flight is withdrawn and its job fails with E303, charged, as a lone
    job at its limit; the documents already converted are stored."""
    bench = round_bench(make_bench, server_concurrency=3)
    ids = submit_samples(bench, 4)
    bench.server.configure(fail_next=1, fail_with="hang", fail_tools=[CONVERT])

    def raise_deadline(signum: int, frame: object) -> None:
        raise DeadlineReached("soft time limit")

    previous = signal.signal(signal.SIGUSR1, raise_deadline)
    try:
        found: Future[UUID] = background.submit(_interrupt_when_hanging, bench, ids)
        outcome = bench.take(ids[0])
    finally:
        signal.signal(signal.SIGUSR1, previous)
    hanging = found.result(timeout=30)

    job = bench.store.reads.get_job(hanging)
    assert job is not None and job.state is JobState.RETRYING and job.error_code == "E303"
    assert bench.store.reads.list_results(hanging) == []
    assert_others_succeeded(bench, ids, hanging)
    assert outcome.kind is (OutcomeKind.RETRY if hanging == ids[0] else OutcomeKind.SUCCEEDED)


def _interrupt_when_hanging(bench: Bench, ids: list[UUID]) -> UUID:
    """SIGUSR1 to the main thread once a call of the round hangs, as Celery's pool signals a
    task at its soft time limit."""
    job_id = wait_for(lambda: hanging_job(bench, ids), timeout=30, message="a call hanging")
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGUSR1)
    return job_id


def test_a_job_tried_before_goes_alone_and_one_not_yet_due_takes_no_round(
    make_bench: Callable[..., Bench],
) -> None:
    """A retrying job claims no companions when it is due (a document that may have broken a
    round goes alone), and is not claimed at all before (the claim takes the next job)."""
    bench = round_bench(make_bench, round_max_s=0)
    ids = submit_samples(bench, 4)
    waiting, due, untouched = ids[0], ids[1], ids[2:]
    for job_id, delay_s in ((waiting, 600.0), (due, 0.0)):
        assert bench.store.attempts.claim(job_id, "another-worker", lease_s=60) is not None
        error = ServerUnavailable("the server went away")
        assert (
            bench.store.attempts.schedule_retry(job_id, 1, error, delay=delay_s)
            is JobState.RETRYING
        )

    claim = bench.processor.claim("doclane.small")
    assert not isinstance(claim, ClaimFound)
    assert claim.job.id == due and claim.companions == [], "due: staged first, alone"
    assert bench.processor.run(claim).kind is OutcomeKind.SUCCEEDED

    jobs = {j.id: j for j in bench.store.reads.get_jobs(ids)}
    assert jobs[due].attempt == 2 and jobs[waiting].state is JobState.RETRYING
    assert [jobs[i].state for i in untouched] == [JobState.QUEUED] * 2, "no round took them"
