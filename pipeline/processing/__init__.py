"""Processing one job: claim, validate, convert through the resilience layer, store.

Celery-free: ``workers/`` turns an :class:`Outcome` into an acknowledgement or a retry.
"""

from __future__ import annotations

from pipeline.processing.batching import BatchRunner, UnitRunner
from pipeline.processing.journal import AttemptLost
from pipeline.processing.lease import LeaseKeeper
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.processor import JobProcessor
from pipeline.processing.settings import ProcessingSettings, load_processing_settings

__all__ = [
    "AttemptLost",
    "BatchRunner",
    "JobProcessor",
    "LeaseKeeper",
    "Outcome",
    "OutcomeKind",
    "ProcessingSettings",
    "UnitRunner",
    "load_processing_settings",
]
