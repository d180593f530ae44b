"""One way to run what a claim took: a job alone, a batch, or a round.

The processor claims a message's job (and, where rounds are claimed with it, the round's
companions in the same statement), then hands what it claimed to the runner that fits it: the
round its claim took, else the first runner the job can lead with companions claimed now (a
batch where the server offers a directory tool, else a round), else the lone runner. Each
runner gives back the outcome of the message's own job; the companions' outcomes are theirs to
publish.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from pipeline.jobs import Job
from pipeline.processing.outcomes import Outcome
from pipeline.support.logs import update_job_context

log = logging.getLogger("doclane.processor")


@dataclass(frozen=True, slots=True)
class Claim:
    """What a message's claim took."""

    #: The job the message names: its claim right is on that job's queue.
    job_id: UUID
    #: The job the fair order gave, claimed for this attempt (often not the message's own);
    #: None when nothing could be (no queued job, only capped tenants', or not due yet).
    job: Job | None
    #: Due jobs claimed to run with it (a round's companions, a batch's).
    companions: list[Job] = field(default_factory=list)
    #: How long the job still waits to be due, when the message came early.
    wait_s: float | None = None
    #: What the claim found (``NextClaim.found``): claimed, empty, capped or wait.
    found: str = "claimed"

    def lead(self) -> Job:
        """The claimed job, for a runner that cannot run without it (alone, a batch)."""
        assert self.job is not None, "this runner is only given a claim that took its job"
        return self.job


def log_claimed(job: Job) -> None:
    """Say what was claimed; the attempt joins the log context of the job's lines."""
    update_job_context(attempt=job.attempt)
    log.info(
        "claimed %s source %s (attempt %d, %d of %d charged)",
        job.source_kind.value,
        job.source_uri,
        job.attempt,
        job.attempts_spent,
        job.max_attempts,
    )


class Runner(Protocol):
    """Runs what a claim took to its end."""

    def run(self, claim: Claim) -> Outcome:
        """The outcome of the message's own job (SKIPPED when the claim took only others)."""
        ...


class SharingRunner(Runner, Protocol):
    """A runner whose jobs share the work with others (a batch's call, a round's threads)."""

    def may_lead(self, job: Job) -> bool:
        """Whether ``job`` can run with others here (its kind, size, and first try)."""
        ...

    def claim_companions(self, lead: Job) -> list[Job]:
        """Due jobs that can run with ``lead``, claimed now (none: ``lead`` goes alone)."""
        ...
