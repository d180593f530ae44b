"""What ``doclane api`` serves: the API with the console mounted at ``/console``, on uvicorn.

The one module that joins the two. The console is built on the API's parts (its context, auth,
errors and result views); were the API to mount it, the two packages would import each other.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI

from errors import PipelineError
from pipeline.api.app import create_app
from pipeline.api.context import ApiContext
from pipeline.console.app import console_app


def create_site(ctx: ApiContext) -> FastAPI:
    """The API (:func:`pipeline.api.app.create_app`) and the console under ``/console``."""
    app = create_app(ctx)
    app.mount("/console", console_app(ctx))
    return app


def serve(ctx: ApiContext) -> None:
    """Make the tokens' tenants that do not exist yet, then run the API on uvicorn at the
    context's host and port until interrupted."""
    import uvicorn

    try:
        ctx.store.tenants.ensure(t.tenant for t in ctx.settings.tokens() if t.tenant)
    except PipelineError as exc:  # the database down: serve anyway (readyz says so)
        logging.getLogger("doclane.api").warning("tokens' tenants not made: %s", exc)

    uvicorn.run(
        create_site(ctx),
        host=ctx.settings.api_host,
        port=ctx.settings.api_port,
        log_level="info",
        access_log=False,
    )
