"""The console's reading pages: the job list, one job, and a result's download."""

from __future__ import annotations

from uuid import UUID

from fastapi import FastAPI, Path, Request
from fastapi.responses import RedirectResponse, Response

from errors import AmbiguousId, InvalidArgument, JobNotFound
from pipeline.admin.jobs import JobDetail, job_detail, list_jobs
from pipeline.api.context import ApiContext
from pipeline.api.results import stream_result
from pipeline.console.listing import BadFilter, ListQuery
from pipeline.console.render import MAX_RENDERED_BYTES, SECURITY_HEADERS, markdown_html, page
from pipeline.console.session import Sessions
from pipeline.jobs.model import JobState
from pipeline.queues import JOB_QUEUES
from pipeline.store.scoped import TenantView


def add_routes(app: FastAPI, ctx: ApiContext, sessions: Sessions) -> None:
    @app.get("/jobs", include_in_schema=False)
    def jobs(
        request: Request,
        *,
        state: str = "",
        error_code: str = "",
        queue: str = "",
        since: str = "",
        until: str = "",
        before: str = "",
        submission: str = "",
        tenant: str = "",
        job: str = "",
    ) -> Response:
        session = sessions.current(request)
        jobs = ctx.jobs_for(session.caller)
        if job.strip():  # "go to a job": its id, or the start of it as shown, in the box
            return _go_to(jobs, job.strip())
        problem = ""
        submission = submission.strip().lower()
        if submission:  # a short id as the list shows it: the whole id in the form and links
            try:
                submission = str(jobs.submission_id(submission))
            except ValueError as exc:
                problem = str(exc)
            except (JobNotFound, AmbiguousId) as exc:
                problem = f"{exc.code}: {exc.message}"
        asked = ListQuery(
            state=state,
            error_code=error_code.strip().upper(),
            queue=queue,
            since=since.strip(),
            until=until,
            before=before,
            submission=submission,
            tenant=tenant.strip().lower(),  # another tenant's, asked by a tenant's token: none
        )
        try:
            found = [] if problem else list_jobs(jobs, asked.to_filter())
        except BadFilter as exc:
            found, problem = [], str(exc)
        except InvalidArgument as exc:  # a NUL byte in a filter: PostgreSQL's text holds none
            found, problem = [], exc.message
        return page(
            "jobs.html",
            session=session,
            asked=asked,
            jobs=found,
            problem=problem,
            next_page=asked.next_page(found),
            states=[s.value for s in JobState],
            queues=JOB_QUEUES,
            tenants=[t.name for t in ctx.store.tenants.list_all()] if jobs.scope.every else [],
            counts=jobs.count_in_flight(),
        )

    @app.get("/jobs/{job_id}", include_in_schema=False)
    def job(request: Request, job_id: str, done: str = "") -> Response:
        session = sessions.current(request)
        jobs = ctx.jobs_for(session.caller)
        try:
            whole = UUID(job_id)
        except ValueError:  # the start of an id, typed into the address: its job's page
            return _go_to(jobs, job_id)
        detail = job_detail(jobs, whole)
        markdown, too_large = _markdown(jobs, detail)
        return page(
            "job.html",
            session=session,
            detail=detail,
            job=detail.job,
            done=done,
            markdown=markdown,
            rendered=markdown_html(markdown) if markdown is not None else None,
            too_large=too_large,
        )

    _download_route(app, ctx, sessions)


def _download_route(app: FastAPI, ctx: ApiContext, sessions: Sessions) -> None:
    @app.get("/jobs/{job_id}/results/{fmt}", include_in_schema=False)
    def download(
        request: Request, job_id: UUID, fmt: str = Path(pattern=r"^[a-z]{1,10}$")
    ) -> Response:
        jobs = ctx.jobs_for(sessions.current(request).caller)
        response = stream_result(jobs, job_id, fmt)
        # Saved, never shown here: an HTML result must not run in the console's origin.
        disposition = f'attachment; filename="{job_id}.{fmt}"'
        response.headers.update({**SECURITY_HEADERS, "Content-Disposition": disposition})
        response.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
        return response


def _go_to(jobs: TenantView, text: str) -> Response:
    """The job the box names (its id, or a unique start of it, among the token's jobs); a page
    saying why not otherwise: no id (422), no such job (404, E108), many (422, E121)."""
    try:
        job_id = jobs.job_id(text)
    except ValueError as exc:
        return page("problem.html", 422, title="Not a job id", message=str(exc))
    except AmbiguousId as exc:
        why = f"{exc.code}: {exc.message}"
        return page("problem.html", 422, title="More than one job", message=why, action=exc.action)
    return RedirectResponse(f"/console/jobs/{job_id}", status_code=303)


def _markdown(jobs: TenantView, detail: JobDetail) -> tuple[str | None, bool]:
    """The markdown result to show (None when there is none), and whether it is too large."""
    info = next((r for r in detail.results if r.format == "md"), None)
    if info is None:
        return None, False
    if info.size_bytes > MAX_RENDERED_BYTES:
        return None, True
    return jobs.result_text(detail.job.id, "md"), False
