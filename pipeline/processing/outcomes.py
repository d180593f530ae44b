"""What one job's attempt came to."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID


class OutcomeKind(StrEnum):
    #: Results stored, job succeeded.
    SUCCEEDED = "succeeded"
    #: Job failed with a code (non-retryable, or no attempts left).
    FAILED = "failed"
    #: Try again in ``countdown_s``: the job is ``retrying`` (or the database was unreachable).
    RETRY = "retry"
    #: Nothing was run for the job (it is finished, cancelled, unknown or running elsewhere).
    SKIPPED = "skipped"
    #: The attempt lost its job while running: the job was cancelled, or its lease expired and
    #: the reconciler requeued it (the job's row says which: ``cancelled``, or ``queued`` with a
    #: higher ``attempt`` once claimed again). Nothing more is written for the attempt; the
    #: same idea is :class:`.journal.AttemptLost` (raised by a write that found it) and
    #: :attr:`.lease.LeaseKeeper.lost` (found by a renewal).
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: OutcomeKind
    job_id: UUID
    attempt: int | None = None
    code: str | None = None
    message: str | None = None
    countdown_s: float | None = None
    #: False for an E309 retry (the attempt was refunded) and for database trouble.
    attempt_spent: bool = True

    @property
    def retry(self) -> bool:
        """Whether the job is to be tried again after ``countdown_s``."""
        return self.kind is OutcomeKind.RETRY
