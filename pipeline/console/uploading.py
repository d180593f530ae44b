"""Trying documents by hand, and the live refresh every console page polls.

The upload page sends each dropped file as its own request (the API takes one document a
request) to ``POST /console/upload``, which is ``POST /v1/jobs``'s multipart upload itself
(``pipeline.api.submit.submit_upload``: streamed into the inbox, the size cap checked as bytes
arrive), behind the session and its CSRF token (a header: the body is the document). Its other
fields (formats, priority, conversion options, a webhook) are that upload's fields, checked there
as the API checks them (a bad option is E110, shown on the file's row). The page then polls
``GET /console/live`` for its jobs' states, as the list and job pages do.
"""

from __future__ import annotations

from uuid import UUID

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from pipeline.api.context import ApiContext
from pipeline.api.submit import submit_upload
from pipeline.console.render import SECURITY_HEADERS, page
from pipeline.console.session import CSRF_HEADER, Sessions, check_csrf
from pipeline.jobs.formats import KNOWN_FORMATS
from pipeline.profiles.settings import ProfileSettings

#: The most jobs one poll asks about (a page of the list, or one upload's files).
MAX_LIVE_IDS = 200

#: Profiles whose servers take no conversion options (they refuse such a job with E305).
_NO_OPTIONS = frozenset({"docling-mcp", "per-format"})


def options_refused_by(profiles: ProfileSettings) -> str | None:
    """The profile this deployment forces (``DOCLANE_PROFILE``) when it takes no conversion
    options, else None. Only a forced profile is known here: ``auto`` picks by the server's tools,
    which the workers read, so the page offers the options and a refusal comes back as E305."""
    profile = profiles.profile
    return profile if profile in _NO_OPTIONS else None


def add_routes(app: FastAPI, ctx: ApiContext, sessions: Sessions) -> None:
    @app.get("/upload", include_in_schema=False)
    def upload_page(request: Request) -> Response:
        session = sessions.current(request)
        session.require("submit")
        return page(
            "upload.html",
            session=session,
            formats=sorted(KNOWN_FORMATS),
            options_refused_by=options_refused_by(ctx.tree.profiles),
            max_bytes=int(ctx.sources.max_source_bytes),
        )

    @app.post("/upload", include_in_schema=False, status_code=202, name="submit")  # as the API
    async def upload(request: Request) -> Response:
        session = sessions.current(request)
        check_csrf(session, request.headers.get(CSRF_HEADER))
        session.require("submit")  # as POST /v1/jobs
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "multipart/form-data":
            raise HTTPException(415, f"unsupported content type {kind or '(none)'!r}")
        answer = await submit_upload(request, ctx, session.caller)
        return JSONResponse(answer.model_dump(mode="json"), 202, headers=SECURITY_HEADERS)

    @app.get("/live", include_in_schema=False)
    async def live(request: Request, ids: str = "") -> Response:
        """The states of the jobs a page shows, and the counts of waiting and running jobs."""
        view = ctx.jobs_for(sessions.current(request).caller)
        try:
            wanted = [UUID(i) for i in ids.split(",") if i][:MAX_LIVE_IDS]
        except ValueError as exc:
            raise HTTPException(422, "ids: job ids, comma-separated") from exc
        jobs = await run_in_threadpool(view.jobs, wanted) if wanted else []
        counts = await run_in_threadpool(view.count_in_flight)
        body = {
            "jobs": {
                str(j.id): {
                    "state": j.state.value,
                    "stage": j.stage.value if j.stage else None,
                    "attempt": j.attempt,
                    "error_code": j.error_code,
                }
                for j in jobs
            },
            "counts": {state.value: n for state, n in counts.items()},
        }
        return JSONResponse(body, headers=SECURITY_HEADERS)
