"""What the console changes: cancel a job, retry one, retry a filtered set of failed jobs.

Each needs a token with the admin role (or, for cancel and retry, a tenant's token with the
submit role, its own jobs), as ``/v1/jobs/{id}/cancel|retry`` do, and is two steps,
as in Sidekiq's web UI: a link opens a page that says exactly what will happen, whose button
posts the form (with the session's CSRF token); nothing changes on a GET. The work itself is
``pipeline.admin``'s, exactly what ``doclane cancel|retry`` and ``/v1/jobs/{id}/cancel|retry``
do.
"""

from __future__ import annotations

from uuid import UUID

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response

from errors import entry
from pipeline.admin.jobs import cancel_job, retry_failed, retry_job
from pipeline.api.context import ApiContext
from pipeline.console.listing import BadFilter, ListQuery
from pipeline.console.render import page
from pipeline.console.session import Session, Sessions, check_csrf

#: The most failed jobs one bulk retry resubmits (the newest first), as ``doclane retry``.
BULK_RETRY_LIMIT = 1000


async def _posted(
    request: Request, sessions: Sessions, *, bulk: bool = False
) -> tuple[Session, dict[str, str]]:
    """The session and the form of a POST that changes something, its CSRF token checked, and
    the token allowed to (a bulk retry: admin; one job's: :meth:`Session.require_change`)."""
    session = sessions.current(request)
    form = {k: str(v) for k, v in (await request.form()).items()}
    check_csrf(session, form.get("csrf"))
    if bulk:
        session.require("admin")
    else:
        session.require_change()
    return session, form


def add_routes(app: FastAPI, ctx: ApiContext, sessions: Sessions) -> None:
    @app.get("/jobs/{job_id}/{action}", include_in_schema=False)
    def confirm(request: Request, job_id: UUID, action: str) -> Response:
        session = sessions.current(request)
        session.require_change()
        if action not in ("cancel", "retry"):
            return page("problem.html", 404, title="Not found", message=f"no action {action!r}")
        job = ctx.jobs_for(session.caller).job(job_id)
        return page("confirm.html", session=session, job=job, job_id=job_id, action=action)

    @app.post("/jobs/{job_id}/cancel", include_in_schema=False)
    async def cancel(request: Request, job_id: UUID) -> Response:
        session, _ = await _posted(request, sessions)
        jobs = ctx.jobs_for(session.caller)
        await run_in_threadpool(cancel_job, jobs, job_id, ctx.publisher)
        return RedirectResponse(f"/console/jobs/{job_id}?done=cancelled", status_code=303)

    @app.post("/jobs/{job_id}/retry", include_in_schema=False)
    async def retry(request: Request, job_id: UUID) -> Response:
        session, _ = await _posted(request, sessions)
        jobs = ctx.jobs_for(session.caller)
        outcome = await run_in_threadpool(retry_job, jobs, ctx.publisher, job_id)
        if outcome.action == "refused":  # nothing was retried: said as the API says it (409)
            why = f"{outcome.code}: {outcome.message}"
            action = entry(outcome.code).action if outcome.code else ""
            return page("problem.html", 409, title="Retry refused", message=why, action=action)
        target = outcome.job_id or job_id
        return RedirectResponse(f"/console/jobs/{target}?done={outcome.action}", status_code=303)

    @app.get("/retry-failed", include_in_schema=False)
    def confirm_bulk(request: Request, error_code: str = "", since: str = "") -> Response:
        session = sessions.current(request)
        session.require("admin")
        asked = ListQuery(state="failed", error_code=error_code.strip().upper(), since=since)
        try:
            failed = ctx.jobs_for(session.caller).list_jobs(asked.to_filter(BULK_RETRY_LIMIT))
        except BadFilter as exc:
            return page("problem.html", 422, title="Not a filter", message=str(exc))
        return page(
            "bulk.html", session=session, asked=asked, count=len(failed), limit=BULK_RETRY_LIMIT
        )

    @app.post("/retry-failed", include_in_schema=False, name="retry_failed")  # as the CLI
    async def bulk_retry(request: Request) -> Response:
        session, form = await _posted(request, sessions, bulk=True)
        code, since = form.get("error_code", "").strip().upper(), form.get("since", "").strip()
        asked = ListQuery(state="failed", error_code=code, since=since)
        try:
            filters = asked.to_filter(limit=BULK_RETRY_LIMIT)
        except BadFilter as exc:
            return page("problem.html", 422, title="Not a filter", message=str(exc))
        jobs = ctx.jobs_for(session.caller)  # a tenant's admin token: its own failed jobs
        outcomes = await run_in_threadpool(
            lambda: retry_failed(
                jobs,
                ctx.publisher,
                error_code=filters.error_code,
                since=filters.since,
                limit=BULK_RETRY_LIMIT,
            )
        )
        return page("retried.html", session=session, asked=asked, outcomes=outcomes)
