"""The HTTP API (FastAPI on uvicorn): thin over ``pipeline.admin`` and ``pipeline.submission``.

Everything but ``/healthz``, ``/readyz``, ``/metrics`` and the status page ``/`` asks for
``Authorization: Bearer <token>``, a token whose role allows the request (``pipeline.api.auth``:
read for GETs, submit for ``POST /v1/jobs``, admin for cancel and retry). A token of a tenant
submits as it, and sees its jobs only: another tenant's job is answered exactly as a job that
does not exist (404, E108), in lists, reads, results, cancel and retry; with the submit role it
may cancel and retry its own. Handlers that touch
PostgreSQL or the broker are plain functions, which FastAPI runs in its thread pool; the upload
is async because it streams the request body into the inbox as it arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from pipeline.admin.jobs import (
    CURSOR_PATTERN,
    JobDetail,
    RetryOutcome,
    cancel_job,
    job_detail,
    list_jobs,
    page_cursor,
    parse_cursor,
    parse_since,
    retry_job,
)
from pipeline.admin.stats import Stats, collect_stats, scoped_stats
from pipeline.api.access_routes import access_router
from pipeline.api.audit_trail import AuditTrail, note_detail
from pipeline.api.auth import Caller, TokenRoles
from pipeline.api.context import ApiContext
from pipeline.api.errors import ErrorResponse, install_handlers, refusal_response
from pipeline.api.idempotency import idempotent
from pipeline.api.metrics import FleetCollector, metrics_registry, render
from pipeline.api.page import render_page
from pipeline.api.quota import quota_retry_after
from pipeline.api.rate_limit import RateLimits
from pipeline.api.results import stream_result
from pipeline.api.submit import (
    OPTION_FIELDS,
    PRIORITY_RANGE,
    WEBHOOK_PATTERN,
    SubmitRequest,
    SubmitResponse,
    submission_detail,
    submission_response,
    submit_json,
    submit_upload,
)
from pipeline.jobs.formats import FORMATS_PATTERN
from pipeline.jobs.model import Job, JobState
from pipeline.jobs.tenants import TENANT_PATTERN
from pipeline.store.admin import JobFilter
from pipeline.store.connection import TEXT_PATTERN
from pipeline.store.ids import ID_PATTERN, SHORT_ID_MIN
from pipeline.store.scoped import TenantView

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": why}
    for code, why in {
        400: "malformed request",
        401: "no or wrong bearer token",
        403: "the token's role does not allow this request, or names another tenant (E109)",
        404: "no such job (E108), or no such result",
        409: "not possible in the job's state (wrong_state), or a retry whose resubmission was "
        "refused (its code: E1xx, E305, E116), or a token's name taken",
        410: "the job's results expired and were deleted (E113, DOCLANE_RESULT_RETENTION)",
        413: "document larger than DOCLANE_MAX_SOURCE_BYTES (E103)",
        415: "neither JSON nor a multipart form",
        422: "invalid parameters, every source refused (E1xx), no such tenant (E116), or an "
        "Idempotency-Key sent with another body (E123)",
        429: "every source refused for the tenant's queue quota (E115), or the caller past its "
        "rate (E122); see Retry-After",
        500: "a bug (E399)",
        502: "a server answered with an error",
        503: "the database, broker or a server is unreachable (E401, E302 ...)",
    }.items()
}


class JobList(BaseModel):
    jobs: list[Job]
    next_before: str | None = Field(
        default=None,
        description="The next page's cursor, to send as `before`: set when this page is full "
        "(`limit` jobs; the next may then be empty), null when it was the last.",
    )


class JobOut(BaseModel):
    job: Job


class Health(BaseModel):
    ok: bool
    parts: dict[str, str] = {}


#: The body of ``POST /v1/jobs`` as the schema shows it: the handler reads the body itself (JSON
#: sources, or one document streamed from a multipart form), so FastAPI cannot derive it.
_SUBMIT_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": SubmitRequest.model_json_schema()},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "to": {"type": "string", "default": "md", "pattern": FORMATS_PATTERN},
                    "priority": {"type": "integer", "default": 0, **PRIORITY_RANGE},
                    "tenant": {"type": "string", "pattern": TENANT_PATTERN},
                    "webhook": {
                        "type": "string",
                        "maxLength": 4096,
                        "pattern": WEBHOOK_PATTERN,
                        "description": "As the JSON body's webhook.",
                    },
                    **OPTION_FIELDS,
                },
            }
        },
    },
}


def create_app(ctx: ApiContext) -> FastAPI:
    """The API: ``/v1`` behind the bearer token, and the operations' routes without it (the
    console is mounted beside them by :mod:`pipeline.site`)."""
    app = FastAPI(
        title="doclane",
        summary="Document conversion jobs, their results, and the fleet's state.",
        version="1",
        responses={500: _ERRORS[500]},
    )
    install_handlers(app)
    app.add_middleware(AuditTrail, store=ctx.store)
    app.include_router(_v1(ctx))
    app.include_router(_operations(ctx))
    return app


def _stats(ctx: ApiContext) -> Stats:
    return collect_stats(ctx.store, ctx.fleet, settings=ctx.admin, resilience=ctx.resilience)


#: A job in a path: its id, or a unique prefix of it, as the console shows ids.
JobIdText = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        description=f"The job's id, or its first characters ({SHORT_ID_MIN} at least) when no "
        "other job's id starts so (E121 otherwise).",
    ),
]


def _job_id(jobs: TenantView, text: str) -> UUID:
    """The job ``text`` names among the view's jobs: E108 for none, E121 for a prefix of more
    than one, 422 for no id."""
    try:
        return jobs.job_id(text)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc


def _viewer(ctx: ApiContext, guard: Callable[..., Caller]) -> Callable[..., TenantView]:
    """A dependency: the jobs the caller may see, once ``guard`` let it in. A route that reads
    a job or acts on one takes this view, so it cannot forget the caller's tenant."""

    def jobs(caller: Caller = Depends(guard)) -> TenantView:  # noqa: B008
        return ctx.jobs_for(caller)

    return jobs


def _v1(ctx: ApiContext) -> APIRouter:
    """The token-protected API: submitting, the jobs, the fleet's figures; every route needs a
    token with the read role at least, and some more (``access.require``)."""
    access = ctx.guard
    rates = RateLimits(ctx.tree.access, ctx.resilience.redis_url)
    guards = [Depends(access.require("read")), Depends(rates.dependency(access))]
    v1 = APIRouter(prefix="/v1", dependencies=guards, responses=_ERRORS)
    v1.include_router(_submission(ctx, access))
    v1.include_router(_jobs(ctx, access))
    v1.include_router(_figures(ctx, access))
    v1.include_router(access_router(ctx, access))
    return v1


def _submission(ctx: ApiContext, access: TokenRoles) -> APIRouter:
    """``POST /jobs``: sources to fetch (JSON), or one document uploaded (multipart)."""
    router = APIRouter()

    @router.post(
        "/jobs",
        status_code=202,
        response_model=SubmitResponse,
        openapi_extra={"requestBody": _SUBMIT_BODY},
    )
    async def submit(
        request: Request,
        caller: Caller = Depends(access.require("submit")),  # noqa: B008
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                max_length=255,
                description="The same key from the same caller within a day answers the first "
                "submission's jobs again (with `Idempotent-Replayed: true`); with another body, "
                "422 E123.",
            ),
        ] = None,
    ) -> Response:
        """Submit sources (JSON) or upload one document (multipart, field ``file``)."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind not in ("application/json", "multipart/form-data"):
            raise HTTPException(415, f"unsupported content type {kind or '(none)'!r}")

        async def run() -> Response:
            if kind == "application/json":
                answer = await submit_json(request, ctx, caller)
            else:
                answer = await submit_upload(request, ctx, caller)
            note_detail(request, submission_detail(answer))
            return submission_response(
                answer,
                retry_after=lambda refused: quota_retry_after(ctx.store, answer.tenant, refused),
            )

        return await idempotent(request, ctx.store, caller, kind, run)

    return router


def _jobs(ctx: ApiContext, access: TokenRoles) -> APIRouter:
    """The jobs once submitted: listed, read, their results, cancelled, retried."""
    router = APIRouter()
    read = _viewer(ctx, access.require("read"))

    @router.get("/jobs", response_model=JobList)
    def jobs(
        *,
        state: JobState | None = None,
        error_code: Annotated[str | None, Query(pattern=r"^E\d{3}$")] = None,
        since: Annotated[
            str | None, Query(pattern=r"^\d{1,4}[smhdw]$", description="e.g. 30m, 1h, 2d, 1w")
        ] = None,
        queue: Annotated[str | None, Query(max_length=200, pattern=TEXT_PATTERN)] = None,
        submission: Annotated[
            str | None,
            Query(
                pattern=ID_PATTERN,
                description="The jobs of one submission: its submission_id, or the first "
                f"characters of it ({SHORT_ID_MIN} at least) when no other submission's id "
                "starts so (E121 otherwise, E108 for none).",
            ),
        ] = None,
        tenant: Annotated[
            str | None,
            Query(pattern=TENANT_PATTERN, description="The jobs of one tenant."),
        ] = None,
        before: Annotated[
            str | None,
            Query(
                max_length=100,
                pattern=CURSOR_PATTERN,
                description="Keyset cursor: the jobs after this one, `<created_at>~<id>` of the "
                "previous page's last job (its answer's `next_before`); one whose time is no "
                "date (a month 13) is 422.",
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        jobs: TenantView = Depends(read),  # noqa: B008
    ) -> JobList:
        """Jobs matching every given filter, newest first (a tenant's token: its own only, and
        none of another tenant's it names), a page of ``limit`` at a time: ``next_before`` is the
        next page's ``before``."""
        try:
            moment = parse_since(since) if since is not None else None
            cursor = parse_cursor(before) if before is not None else None
            chosen = jobs.submission_id(submission) if submission is not None else None
        except (ValueError, OverflowError) as exc:
            raise HTTPException(422, str(exc)) from exc
        filters = JobFilter(
            state=state,
            error_code=error_code,
            since=moment,
            queue=queue,
            submission=chosen,
            tenant=tenant,
            before=cursor,
            limit=limit,
        )
        found = list_jobs(jobs, filters)
        full = len(found) == limit
        return JobList(jobs=found, next_before=page_cursor(found[-1]) if full else None)

    @router.get("/jobs/{job_id}", response_model=JobDetail)
    def job(job_id: JobIdText, jobs: TenantView = Depends(read)) -> JobDetail:  # noqa: B008
        """A job: state, stage, attempts, its error explained, results and history."""
        return job_detail(jobs, _job_id(jobs, job_id))

    @router.get(
        "/jobs/{job_id}/result/{fmt}",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/plain": {}}, "description": "the result, as stored"}},
    )
    def result(
        job_id: JobIdText,
        fmt: Annotated[str, Path(pattern=r"^[a-z]{1,10}$")],
        jobs: TenantView = Depends(read),  # noqa: B008
    ) -> Response:
        """One result of a succeeded job, streamed from the result store as stored."""
        return stream_result(jobs, _job_id(jobs, job_id), fmt)

    change = _viewer(ctx, access.changer())

    @router.post("/jobs/{job_id}/cancel", response_model=JobOut)
    def cancel(job_id: JobIdText, jobs: TenantView = Depends(change)) -> JobOut:  # noqa: B008
        """Cancel a queued, waiting (its slices with it), retrying or running job (admin; a
        tenant's submit token, its own jobs)."""
        return JobOut(job=cancel_job(jobs, _job_id(jobs, job_id), ctx.publisher))

    @router.post("/jobs/{job_id}/retry", response_model=RetryOutcome)
    def retry(job_id: JobIdText, jobs: TenantView = Depends(change)) -> Response | RetryOutcome:  # noqa: B008
        """A waiting job now; a failed or cancelled one as a new job, its tenant's (admin; a
        tenant's submit token, its own jobs). A resubmission refused (the source is gone, no
        configured server can serve it, ...) is 409 with the refusal's code: nothing was
        retried, and a client that reads only the status must not take it for done."""
        jid = _job_id(jobs, job_id)
        outcome = retry_job(jobs, ctx.publisher, jid)
        if outcome.action == "refused" and outcome.code is not None:
            detail = outcome.model_dump(mode="json")
            return refusal_response(409, outcome.code, outcome.message or "", detail)
        return outcome

    return router


def _figures(ctx: ApiContext, access: TokenRoles) -> APIRouter:
    """``GET /stats``: the fleet's figures, as ``doclane stats --json`` prints them."""
    router = APIRouter()

    read = _viewer(ctx, access.require("read"))

    @router.get("/stats", response_model=Stats)
    def stats_endpoint(jobs: TenantView = Depends(read)) -> Stats:  # noqa: B008
        """What ``doclane stats --json`` prints; a tenant's token gets its own tenant's figures
        only (the fleet's sums would tell it about the other tenants' work)."""
        return scoped_stats(jobs, ctx.fleet, settings=ctx.admin, resilience=ctx.resilience)

    return router


def _operations(ctx: ApiContext) -> APIRouter:
    """What needs no token: health, readiness, metrics, the status page."""
    registry = metrics_registry(
        FleetCollector(
            ctx.store,
            ctx.fleet,
            ctx.resilience,
            deadline_s=ctx.admin.stats_deadline_s,
        )
    )
    scrape_lock = threading.Lock()
    router = APIRouter()

    @router.get("/healthz", response_model=Health)
    def healthz() -> Health:
        """The process is alive."""
        return Health(ok=True)

    @router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
    def readyz() -> Response:
        """The database and the broker answer."""
        parts: dict[str, str] = {}
        try:
            ctx.store.pool.ping()
            parts["database"] = "ok"
        except Exception as exc:
            parts["database"] = str(exc)
        if ctx.fleet is not None:
            try:
                ctx.fleet.queue_depths()
                parts["broker"] = "ok"
            except Exception as exc:
                parts["broker"] = f"{type(exc).__name__}: {exc}"
        ok = all(v == "ok" for v in parts.values())
        return JSONResponse(Health(ok=ok, parts=parts).model_dump(), status_code=200 if ok else 503)

    @router.get(
        "/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}}
    )
    def metrics() -> Response:
        """Prometheus exposition: the whole fleet's figures, read at scrape time."""
        with scrape_lock:  # one scrape at a time: each reads the same few index ranges
            body = render(registry)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    @router.get("/", response_class=HTMLResponse, include_in_schema=True)
    def page() -> HTMLResponse:
        """The status page (aggregates only, no token)."""
        return HTMLResponse(render_page(_stats(ctx), refresh_s=ctx.settings.api_page_refresh_s))

    return router
