"""What an attempt that did not succeed comes to: the job-level retry policy.

- A retryable error is charged (one attempt spent) and retried after an exponential, jittered
  backoff; with no attempts left the job fails with the last code.
- An open circuit (E309) is not the job's fault: when no try of this attempt reached a server
  (every origin's breaker refused it), the attempt is refunded and the job waits out the
  breaker's reset. When an earlier try did reach one (E302, then every circuit open), the
  attempt was really spent, and it is charged like any retryable error, still waiting for the
  reset. Once a process has found every circuit open, it claims no job until the reset: its
  drain ends and rings the queue again for then.
- A database that went away mid-attempt is never the job's fault either: the job is handed back
  uncharged once the database answers (within one lease), and storing finished results waits
  for it the same way, so a database hiccup never costs a conversion.
- A non-retryable error fails the job.

Every write is guarded by the attempt: one that lost its job writes nothing (``LOST``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from errors import CircuitOpen, DatabaseUnavailable, PipelineError
from pipeline.jobs.model import Job, JobState, Stage
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.settings import ProcessingSettings
from pipeline.queues import Publisher, Wakeup, ring
from pipeline.store.attempts import Attempts
from pipeline.support.waits import Backoff, half_jitter

T = TypeVar("T")
log = logging.getLogger("doclane.processor")

#: Trying again while the database is unreachable: every few seconds at most.
DATABASE_WAITS = Backoff(first_s=1.0, max_s=5.0)


class FailurePolicy:
    """Turns an attempt's error into the job's next state."""

    def __init__(self, store: Attempts, settings: ProcessingSettings) -> None:
        self.store = store
        self.settings = settings
        #: A charged retry's wait, exponential in the attempts charged so far.
        self.job_waits = Backoff(settings.job_retry_base_s, settings.job_retry_max_s, half_jitter)

    # ---- outcomes -----------------------------------------------------------------------------
    def failure(
        self, job: Job, error: PipelineError, *, reached_server: bool, stage: Stage | None = None
    ) -> Outcome:
        """Record ``error`` for this attempt (see the module docstring), and ``stage``, the step
        it failed in, as the job's stage (None: the stage last written stays)."""
        try:
            return self._record(job, error, reached_server=reached_server, stage=stage)
        except DatabaseUnavailable as exc:
            log.warning("cannot record %s: %s", error.code, exc)
            return self.give_back_uncharged(job, exc)

    def give_back_uncharged(self, job: Job, error: DatabaseUnavailable) -> Outcome:
        """The database went away mid-attempt: give the job back uncharged once it answers.

        A database gone for longer than one lease leaves the job running under a lapsing
        lease; the reconciler requeues it, charged, as it does for a worker that died.
        """
        delay = half_jitter(self.settings.db_retry_s)
        try:
            state = self.retry_while_database_down(
                lambda: self.store.schedule_retry(
                    job.id, job.attempt, error, delay=delay, spend_attempt=False
                )
            )
        except DatabaseUnavailable:
            log.error("database still unreachable: the job waits for its lease to lapse")
            return uncharged_retry(
                job.id, job.attempt, error, half_jitter(self.settings.db_retry_s)
            )
        if state is None:
            return lost(job, "handing the job back")
        log.warning("handed back uncharged; retrying in %.1fs", delay)
        return uncharged_retry(job.id, job.attempt, error, delay)

    def retry_while_database_down(
        self, write: Callable[[], T], what: str = "handing the job back"
    ) -> T:
        """``write``, tried again with backoff while the database is unreachable, for up to
        one lease (the lease keeper renews meanwhile, as long as the database lets it)."""

        def waiting(details: Any) -> None:
            if details["tries"] == 1:
                log.warning(
                    "database unreachable while %s (%s); trying again for up to %.0fs",
                    what,
                    details["exception"],
                    self.settings.lease_s,
                )

        retrying = DATABASE_WAITS.on_exception(
            DatabaseUnavailable, max_time=self.settings.lease_s, on_backoff=waiting
        )(write)
        return retrying()

    def _record(
        self, job: Job, error: PipelineError, *, reached_server: bool, stage: Stage | None
    ) -> Outcome:
        circuit_open = isinstance(error, CircuitOpen)
        if circuit_open and not reached_server:
            delay = after_reset(error.retry_after or self.settings.circuit_retry_s)
            state = self.store.schedule_retry(
                job.id, job.attempt, error, delay=delay, spend_attempt=False, stage=stage
            )
            if state is None:
                return lost(job, "scheduling a retry")
            log.warning("%s; retrying in %.1fs without charging an attempt", error, delay)
            return uncharged_retry(job.id, job.attempt, error, delay)
        if error.retryable:
            delay = max(self.job_waits.wait(job.attempts_spent), error.retry_after or 0.0)
            if circuit_open:  # charged: a try reached a server before the circuits opened
                delay = max(delay, after_reset(error.retry_after or self.settings.circuit_retry_s))
            state = self.store.schedule_retry(job.id, job.attempt, error, delay=delay, stage=stage)
            if state is None:
                return lost(job, "scheduling a retry")
            if state is JobState.RETRYING:
                log.warning(
                    "%s; retrying in %.1fs (%d of %d attempts charged)",
                    error,
                    delay,
                    job.attempts_spent,
                    job.max_attempts,
                )
                return Outcome(
                    OutcomeKind.RETRY, job.id, job.attempt, error.code, error.message, delay
                )
            log.error("%s; no attempts left: failed", error)
            return Outcome(OutcomeKind.FAILED, job.id, job.attempt, error.code, error.message)
        if not self.store.fail(job.id, job.attempt, error, stage=stage):
            return lost(job, "recording the failure")
        log.error("failed: %s", error)
        return Outcome(OutcomeKind.FAILED, job.id, job.attempt, error.code, error.message)


def uncharged_retry(
    job_id: UUID, attempt: int | None, error: PipelineError, delay: float
) -> Outcome:
    """Try again in ``delay`` seconds without charging an attempt (E309, E401)."""
    return Outcome(
        OutcomeKind.RETRY,
        job_id,
        attempt,
        error.code,
        error.message,
        countdown_s=delay,
        attempt_spent=False,
    )


def lost(job: Job, where: str) -> Outcome:
    log.warning("attempt lost its job (%s): the job was cancelled or requeued", where)
    return Outcome(OutcomeKind.LOST, job.id, job.attempt, message=where)


def after_reset(reset_in: float) -> float:
    """After the breaker's reset, never before it (an early try only meets E309 again),
    spread over a quarter of the wait so the fleet does not return in one burst."""
    return round(reset_in + random.uniform(0.05, max(reset_in / 4.0, 0.5)), 3)


def ring_when_due(publisher: Publisher, job: Job, outcome: Outcome | None) -> None:
    """A job that must be tried again is ``retrying``, due by its row (the claim stages it
    then): its queue is rung for that time so that it is not left to the reconciler's next
    pass. The bell is only a wake-up: lost, the reconciler rings within an interval."""
    if outcome is None or not outcome.retry or outcome.countdown_s is None:
        return
    due_s = round(outcome.countdown_s + 0.05, 3)
    wakeup = Wakeup(job.queue, priority=job.priority, countdown_s=due_s)
    ring(publisher, [wakeup])
