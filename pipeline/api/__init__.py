"""The HTTP API (``doclane api``): jobs, results, stats, health, metrics and the status page.

::

    from pipeline.api.app import create_app
    from pipeline.api.context import ApiContext
    app = create_app(ApiContext(...))   # a FastAPI app; pipeline.site mounts the console beside it

The composition root (``pipeline.cli``) builds the context (store, Celery publisher and fleet),
so this package, like the rest of ``pipeline``, never imports Celery. This ``__init__`` imports
nothing (docs/architecture.md): importers name the module (``ApiSettings`` is
``pipeline.settings.api``'s).
"""
