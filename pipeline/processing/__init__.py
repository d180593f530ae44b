"""Processing one job: claim, validate, convert through the resilience layer, store.

Celery-free: ``workers/`` turns an :class:`Outcome` into an acknowledgement or a retry. Names
are imported on first use (:mod:`pipeline.support.lazy`): a publisher reads ``ProcessingSettings``
without loading the processor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.processing.batching import BatchRunner as BatchRunner
    from pipeline.processing.batching import UnitRunner as UnitRunner
    from pipeline.processing.journal import AttemptLost as AttemptLost
    from pipeline.processing.lease import LeaseKeeper as LeaseKeeper
    from pipeline.processing.outcomes import Outcome as Outcome
    from pipeline.processing.outcomes import OutcomeKind as OutcomeKind
    from pipeline.processing.processor import JobProcessor as JobProcessor
    from pipeline.processing.settings import ProcessingSettings as ProcessingSettings

if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
