"""What processing one job message came to, for the glue that acknowledges or retries it."""

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
    #: Nothing to claim: the job is finished, cancelled, unknown or running elsewhere.
    SKIPPED = "skipped"
    #: The attempt lost its claim while running (cancelled, or its lease expired and it was
    #: requeued): nothing was written, someone else owns the job now.
    ABANDONED = "abandoned"


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
        return self.kind is OutcomeKind.RETRY
