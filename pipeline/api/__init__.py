"""The HTTP API (``doclane api``): jobs, results, stats, health, metrics and the status page.

::

    from pipeline.api import ApiContext, create_app
    app = create_app(ApiContext(...))          # a FastAPI app; ``serve`` runs it on uvicorn

The composition root (``pipeline.cli``) builds the context (store, Celery publisher and fleet),
so this package, like the rest of ``pipeline``, never imports Celery.
"""

from __future__ import annotations

import logging

from errors import PipelineError
from pipeline.api.app import create_app
from pipeline.api.context import ApiContext
from pipeline.settings.api import ApiSettings

__all__ = ["ApiContext", "ApiSettings", "create_app", "serve"]


def serve(ctx: ApiContext) -> None:
    """Make the tokens' tenants that do not exist yet, then run the API on uvicorn at the
    context's host and port until interrupted."""
    import uvicorn

    try:
        ctx.store.tenants.ensure(t.tenant for t in ctx.settings.tokens() if t.tenant)
    except PipelineError as exc:  # the database down: serve anyway (readyz says so)
        logging.getLogger("doclane.api").warning("tokens' tenants not made: %s", exc)

    uvicorn.run(
        create_app(ctx),
        host=ctx.settings.api_host,
        port=ctx.settings.api_port,
        log_level="info",
        access_log=False,
    )
