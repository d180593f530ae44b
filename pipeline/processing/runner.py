"""One way to run what a claim took: a job alone, a batch, or a round.

A drain claims the fair order's next job (and, where rounds are claimed with it, the round's
companions in the same statement), then hands what it claimed to the runner that fits it: the
round its claim took, else the first runner the job can lead with companions claimed now (a
batch where the server offers a directory tool, else a round), else the lone runner. Each
runner gives back the lead's outcome; a companion that must be tried again rings its queue
for when it is due.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from pipeline.jobs.model import Job
from pipeline.processing.outcomes import Outcome
from pipeline.support.logs import update_job_context

log = logging.getLogger("doclane.processor")


@dataclass(frozen=True, slots=True)
class Claim:
    """What a drain's claim took: its lead, and the jobs claimed to run with it."""

    #: The fair order's next job, claimed for this attempt.
    job: Job
    #: Due jobs claimed to run with it (a round's companions, a batch's).
    companions: list[Job] = field(default_factory=list)

    def lead(self) -> Job:
        """The claimed lead."""
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
        """The outcome of the claim's lead."""
        ...


class SharingRunner(Runner, Protocol):
    """A runner whose jobs share the work with others (a batch's call, a round's threads)."""

    def may_lead(self, job: Job) -> bool:
        """Whether ``job`` can run with others here (its kind, size, and first try)."""
        ...

    def claim_companions(self, lead: Job) -> list[Job]:
        """Due jobs that can run with ``lead``, claimed now (none: ``lead`` goes alone)."""
        ...
