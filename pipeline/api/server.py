"""``doclane api``'s server: the app of :func:`pipeline.api.app.create_app` on uvicorn."""

from __future__ import annotations

import logging

from errors import PipelineError
from pipeline.api.app import create_app
from pipeline.api.context import ApiContext


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
