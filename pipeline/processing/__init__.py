"""Processing one job: claim, validate, convert through the resilience layer, store.

Celery-free: ``workers/`` turns an :class:`Outcome` into an acknowledgement or a retry. Names
are imported on first use (:mod:`pipeline.support.lazy`): a publisher reads ``ProcessingSettings``
without loading the processor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.processing.batching import BatchRunner, UnitRunner
    from pipeline.processing.journal import AttemptLost
    from pipeline.processing.lease import LeaseKeeper
    from pipeline.processing.outcomes import Outcome, OutcomeKind
    from pipeline.processing.processor import JobProcessor
    from pipeline.processing.settings import ProcessingSettings

__getattr__ = lazy.exports(
    __name__,
    {
        "AttemptLost": ".journal",
        "BatchRunner": ".batching",
        "JobProcessor": ".processor",
        "LeaseKeeper": ".lease",
        "Outcome": ".outcomes",
        "OutcomeKind": ".outcomes",
        "ProcessingSettings": ".settings",
        "UnitRunner": ".batching",
    },
)

__all__ = [
    "AttemptLost",
    "BatchRunner",
    "JobProcessor",
    "LeaseKeeper",
    "Outcome",
    "OutcomeKind",
    "ProcessingSettings",
    "UnitRunner",
]
