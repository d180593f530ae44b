"""One running attempt's parts: its job, the journal of its writes, its lease and its cancel.

The processor makes one for a lone job, and one for each job of a round; whatever runs the
attempt (the calling thread, or a round's pool thread) holds them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.jobs.model import Job
from pipeline.mcp.watchdog import CancelScope
from pipeline.processing.journal import AttemptJournal
from pipeline.processing.lease import LeaseKeeper
from pipeline.resilience.retry import RetryRecord


@dataclass
class Attempt:
    job: Job
    journal: AttemptJournal
    keeper: LeaseKeeper
    #: Cancelled by the keeper when the job is no longer this attempt's: the call in flight ends.
    scope: CancelScope
    #: The resilience layer's record of the unit's tries (did one reach a server?).
    tries: RetryRecord = field(default_factory=RetryRecord)
