"""Small documents in rounds: many jobs of one worker process in flight at once.

Against a server that converts a small document in milliseconds, a job at a time spends more on
its own bookkeeping (a claim, a commit that waits for the disk, Celery's hand-off) than on the
conversion. A round spreads that over many jobs: a worker that claimed a small, never-tried file
job (its *lead*) claims up to ``DOCLANE_ROUND_MAX_DOCS - 1`` more due jobs that can share the
round, in one statement (same queue, profile, options and formats; SKIP LOCKED, so two workers
never wait for each other's rows). Their conversions run concurrently on the process's round
threads, at most ``DOCLANE_SERVER_CONCURRENCY`` at a time (the server's own concurrency: over
stdio as many requests in flight on the child's pipe, matched by id; over HTTP as many
requests on the client's connection pool), each through the resilience layer as a lone job's
unit, with whatever profile the server's tools select. The finished results are stored in one
transaction (one commit, one wait for the disk), each under its own fence.

Each job stays its own: its own claim, attempt, lease (kept by its own keeper on the process's
timer thread), journal, cancel scope and outcome. A cancel reaches only that job's call; a
failure is that job's retry or failure; a fence that no longer matches loses only that job's
results. A worker killed mid-round leaves its jobs running with leases that lapse: the reconciler
requeues them, and since every write is fenced by its attempt nothing is stored twice; a
requeued job has been tried, so it goes alone next time (only never-tried jobs share a round).

The companions' own broker messages later find nothing to claim; a companion that ends retrying
gets a message of its own through the publisher, the lead's outcome goes back to the glue.

docling-mcp's directory tool (:mod:`.batching`) is a different bargain: one call for many
documents, which a server without concurrency needs, at the price of proving each result's key.
Where it applies (the server offers it and shares its cache folder) it is tried first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from errors import CallTimeout, DatabaseUnavailable
from pipeline.jobs import Job
from pipeline.processing.attempt import Attempt
from pipeline.processing.failures import FailurePolicy, publish_next_attempt
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.settings import ProcessingSettings
from pipeline.profiles import Conversion
from pipeline.queues import SMALL_BELOW_BYTES, Publisher
from pipeline.store import JobStore
from pipeline.support.logs import job_context

log = logging.getLogger("doclane.processor")


class AttemptSteps(Protocol):
    """The lone job's steps, as the processor runs them (``JobProcessor``)."""

    def begin(self, job: Job) -> Attempt: ...

    def converted(self, attempt: Attempt) -> Conversion | Outcome: ...

    def stored(self, attempt: Attempt, write: Callable[[], bool]) -> Outcome: ...

    def ended(self, attempt: Attempt, exc: Exception) -> Outcome: ...


@dataclass
class _Member:
    attempt: Attempt
    conversion: Conversion | None = None
    outcome: Outcome | None = None


class RoundRunner:
    """Claims companions for a lead job and runs them all at once (see the module docstring)."""

    def __init__(
        self,
        *,
        store: JobStore,
        steps: AttemptSteps,
        failures: FailurePolicy,
        settings: ProcessingSettings,
        publisher: Publisher,
        worker_id: str,
    ) -> None:
        self.store = store
        self.steps = steps
        self.failures = failures
        self.settings = settings
        self.publisher = publisher
        self.worker_id = worker_id
        self._threads: ThreadPoolExecutor | None = None

    def may_lead(self, job: Job) -> bool:
        return (
            self.settings.round_max_docs > 1
            and job.attempt == 1
            and job.source_kind.value == "file"
            and job.size_bytes is not None
            and job.size_bytes < SMALL_BELOW_BYTES
        )

    def claim_companions(self, lead: Job) -> list[Job]:
        return self.store.claim_round(
            lead,
            self.worker_id,
            self.settings.lease_s,
            limit=self.settings.round_max_docs - 1,
            small_below=SMALL_BELOW_BYTES,
        )

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None

    # ---- one round ---------------------------------------------------------------------------
    def run(self, lead: Job, companions: list[Job]) -> Outcome:
        members = [_Member(self.steps.begin(job)) for job in [lead, *companions]]
        log.info("round of %d document(s) led by %s", len(members), lead.id)
        try:
            self._convert_all(members)
            self._store_all([m for m in members if m.conversion is not None])
        finally:
            for member in members:
                member.attempt.keeper.stop()
        for member in members[1:]:
            publish_next_attempt(self.publisher, member.attempt.job, member.outcome)
        assert members[0].outcome is not None
        return members[0].outcome

    def _convert_all(self, members: list[_Member]) -> None:
        """Every member's conversion, at most the server's concurrency at once.

        A deadline that interrupts the wait (the lead's task time limit) cancels every call
        still in flight; their jobs fail with E303 as a lone job at its limit does, and the
        jobs already converted are stored."""
        threads = self._pool()
        futures: list[Future[Conversion | Outcome]] = [
            threads.submit(self._convert_one, member.attempt) for member in members
        ]
        try:
            wait(futures)
        except Exception as limit:  # the task's soft time limit: what is converted is stored
            self._cancel_all(members, futures)
            self._settle_converted(members, futures, limit)
            return
        except BaseException:  # the process is stopping: nothing more is written
            self._cancel_all(members, futures)
            raise
        self._settle_converted(members, futures, None)

    @staticmethod
    def _cancel_all(members: list[_Member], futures: list[Future[Conversion | Outcome]]) -> None:
        for member in members:
            member.attempt.scope.cancel("the round reached its time limit")
        wait(futures)

    def _convert_one(self, attempt: Attempt) -> Conversion | Outcome:
        with job_context(str(attempt.job.id), attempt.job.attempt):
            attempt.journal.hold_from_now()
            return self.steps.converted(attempt)

    def _settle_converted(
        self,
        members: list[_Member],
        futures: list[Future[Conversion | Outcome]],
        stop: BaseException | None,
    ) -> None:
        for member, future in zip(members, futures, strict=True):
            result = future.result()
            if isinstance(result, Outcome):
                member.outcome = result
                timed_out = result.kind is OutcomeKind.LOST and not member.attempt.keeper.lost
                if stop is not None and timed_out:
                    limit = CallTimeout("the round reached the time limit of its size tier")
                    member.outcome = self.steps.ended(member.attempt, limit)
            else:
                member.conversion = result

    def _store_all(self, done: list[_Member]) -> None:
        """The converted members' results in one transaction, each under its own fence."""
        if not done:
            return
        ends = [m.attempt.journal.results(m.conversion) for m in done if m.conversion]
        try:
            stored = self.failures.patiently(
                lambda: self.store.finish_together(ends), "storing a round's results"
            )
        except DatabaseUnavailable as exc:
            for member in done:
                member.outcome = self.steps.ended(member.attempt, exc)
            return
        except ValueError:  # one member's results are not its formats: find whose, alone
            for member in done:
                self._store_alone(member)
            return
        for member, ours in zip(done, stored, strict=True):
            member.outcome = self.steps.stored(member.attempt, _already(ours))

    def _store_alone(self, member: _Member) -> None:
        conversion, journal = member.conversion, member.attempt.journal
        assert conversion is not None
        member.outcome = self.steps.stored(member.attempt, lambda: journal.finish(conversion))

    def _pool(self) -> ThreadPoolExecutor:
        """The process's round threads, made on first use (after the fork, in a worker)."""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(
                max_workers=self.settings.server_concurrency, thread_name_prefix="doclane-round"
            )
        return self._threads


def _already(stored: bool) -> Callable[[], bool]:
    """A write that was already made (in the round's one transaction), and what it found."""
    return lambda: stored
