"""Processing one job: claim, validate, convert through the resilience layer, store.

Celery-free: ``workers/`` turns an ``Outcome`` (``pipeline.processing.outcomes``) into an
acknowledgement or a retry. This ``__init__`` imports nothing (docs/architecture.md): importers
name the module, so a publisher reads ``ProcessingSettings`` (``pipeline.processing.settings``)
without loading the processor (``processor``: ``JobProcessor``; ``batching``: ``BatchRunner``,
``UnitRunner``; ``lease``: ``LeaseKeeper``; ``journal``: ``AttemptLost``).
"""
