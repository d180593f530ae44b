"""Celery glue: the app, its tasks, the reconciler's beat schedule, and the Celery publisher.

Thin on purpose: every decision about a job is made in ``pipeline.processing`` and
``pipeline.reconciler.sweeps``; this package only turns their outcomes into acknowledgements and
retries, and owns the per-process resources (store, MCP pool) across Celery's process model.
"""
