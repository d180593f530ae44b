"""Jobs as admins handle them: listed by filters, shown whole, retried one at a time or in bulk,
cancelled. The CLI (``doclane jobs|status|retry``) and the HTTP API (``/v1/jobs``) both call
these, so both answer the same question the same way.

A finished job never changes (the database refuses it), so "retry" of a failed or cancelled job
submits its source again as a new job, checked again exactly as ``doclane submit`` checks it; the
old job's trail gets a note naming its successor.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from errors import MissingCapability, UnknownTenant, entry
from pipeline.jobs.formats import Formats
from pipeline.jobs.model import Job, JobEvent, JobState, ResultInfo
from pipeline.jobs.options import ConversionOptions
from pipeline.jobs.request import SubmissionRequest
from pipeline.queues import Publisher, Wakeup, ring
from pipeline.store.admin import JobFilter
from pipeline.store.scoped import TenantView
from pipeline.store.store import JobStore
from pipeline.support.secrets import process_masker

_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class WrongState(ValueError):
    """The job's state does not allow it (retry a running job, cancel a finished one)."""


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``30m``, ``1h``, ``2d``, ``1w`` ago, or an ISO 8601 time; ``ValueError`` otherwise."""
    match = _SINCE.match(text)
    moment = now or datetime.now(UTC)
    if match:
        return moment - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (use e.g. 30m, 1h, 2d, or 2026-11-23T08:00:00Z)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def list_jobs(jobs: TenantView, filters: JobFilter) -> list[Job]:
    """Newest first; every given filter applies, within the view's tenants."""
    return jobs.list_jobs(filters)


#: What :func:`page_cursor` writes: an ISO 8601 time with its offset, ``~``, a job's id.
CURSOR_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})"
    r"~[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)


def page_cursor(job: Job) -> str:
    """The keyset cursor of the page after ``job`` (the last of its page): ``<created_at>~<id>``,
    what the console's next-page link and ``GET /v1/jobs``'s ``before`` carry. Its created_at
    bound is where the index range scan starts; the id breaks ties between jobs made in one
    statement (a submission's COPY gives them all one created_at)."""
    return f"{job.created_at.isoformat()}~{job.id}"


def parse_cursor(text: str) -> tuple[datetime, UUID]:
    """What :func:`page_cursor` wrote, as ``JobFilter.before`` takes it; ``ValueError``
    otherwise (a damaged link, a made-up cursor)."""
    at, _, job_id = text.partition("~")
    moment = datetime.fromisoformat(at)
    if moment.tzinfo is None:
        raise ValueError(f"a cursor's time carries its offset, not {at[:40]!r}")
    return moment, UUID(job_id)


class ErrorInfo(BaseModel):
    code: str
    title: str
    message: str | None
    user_message: str
    action: str
    retryable: bool


class JobDetail(BaseModel):
    """A job, its error explained from the catalog, its results and its history."""

    job: Job
    error: ErrorInfo | None
    results: list[ResultInfo]
    events: list[JobEvent]


def job_detail(jobs: TenantView, job_id: UUID, *, events: bool = True) -> JobDetail:
    """The job whole; E108 when the view has no such job."""
    job = jobs.job(job_id)
    return JobDetail(
        job=job,
        error=error_info(job),
        results=jobs.results(job_id),
        events=jobs.events(job_id) if events else [],
    )


def error_info(job: Job) -> ErrorInfo | None:
    if not job.error_code:
        return None
    try:
        row = entry(job.error_code)
    except KeyError:
        return ErrorInfo(
            code=job.error_code,
            title="unknown code",
            message=job.error_message,
            user_message="This error code is not in this doclane's catalog.",
            action="",
            retryable=False,
        )
    return ErrorInfo(
        code=job.error_code,
        title=row.title,
        message=job.error_message,
        user_message=row.user_message,
        action=row.action,
        retryable=row.retryable,
    )


class RetryOutcome(BaseModel):
    """One retried job: published again (waiting jobs), resubmitted as a new job, or refused."""

    retry_of: UUID
    action: str  # "published" | "resubmitted" | "refused"
    job_id: UUID | None = None
    code: str | None = None
    message: str | None = None


def retry_job(jobs: TenantView, publisher: Publisher, job_id: UUID) -> RetryOutcome:
    """A waiting job now (its backoff waived); a failed or cancelled one as a new job, its
    tenant's. E108 when the view has no such job."""
    job = jobs.job(job_id)
    if job.state in (JobState.QUEUED, JobState.RETRYING):
        jobs.store.operations.make_due(job.id)
        ring(publisher, [Wakeup(job.queue, priority=job.priority)])
        return RetryOutcome(retry_of=job.id, action="published", job_id=job.id)
    if job.state in (JobState.FAILED, JobState.CANCELLED):
        return _resubmit(jobs.store, publisher, [job])[0]
    raise WrongState(f"job {job.id} is {job.state.value}: nothing to retry")


def retry_failed(
    jobs: TenantView,
    publisher: Publisher,
    *,
    error_code: str | None = None,
    since: datetime | None = None,
    limit: int = 1000,
) -> list[RetryOutcome]:
    """Resubmit the newest ``limit`` failed jobs of the view matching the filters (submitted
    ``since``).

    A failed slice is left alone: its document failed with it, and resubmitting the document
    converts it again (a slice resubmitted on its own would be a few pages, nobody's result).
    """
    failed = jobs.list_jobs(
        JobFilter(state=JobState.FAILED, error_code=error_code, since=since, limit=limit)
    )
    return _resubmit(jobs.store, publisher, [job for job in failed if job.parent_id is None])


@dataclass
class _Group:
    formats: tuple[str, ...]
    priority: int
    options: dict[str, Any]
    tenant: str
    jobs: list[Job] = field(default_factory=list)


def _resubmit(store: JobStore, publisher: Publisher, jobs: list[Job]) -> list[RetryOutcome]:
    """Submit the jobs' sources again, one ``enqueue`` per set of formats/priority/options and
    tenant (a retried job stays its tenant's, under its quota)."""
    # Here, not at the top: listing and reading jobs (doclane jobs, stats, the API's GETs) need
    # none of submission's source checks and HTTP client.
    from pipeline.submission.intake import enqueue

    masker = process_masker()
    groups: dict[tuple[Any, ...], _Group] = {}
    for job in jobs:
        key = (job.formats, job.priority, repr(sorted(job.options.items())), job.tenant)
        group = _Group(job.formats, job.priority, dict(job.options), job.tenant)
        groups.setdefault(key, group).jobs.append(job)
    outcomes: dict[UUID, RetryOutcome] = {}
    for group in groups.values():
        by_source: dict[str, list[Job]] = defaultdict(list)
        for job in group.jobs:
            by_source[job.fetch_uri].append(job)
        # enqueue names sources as everyone is shown them (a URL's secrets masked)
        by_shown = {masker.text(source): jobs for source, jobs in by_source.items()}
        asked = SubmissionRequest(
            list(by_source),
            Formats.from_stored(group.formats),
            ConversionOptions.from_stored(group.options),
            group.priority,
            tenant=group.tenant,
        )
        try:
            submission = enqueue(asked, publisher=publisher, store=store, masker=masker)
        except (
            MissingCapability,
            UnknownTenant,
        ) as refused:  # no configured server can: the group stays put
            for old in group.jobs:
                outcomes[old.id] = RetryOutcome(
                    retry_of=old.id, action="refused", code=refused.code, message=refused.message
                )
            continue
        for accepted in submission.accepted:
            for old in by_shown.get(accepted.source, []):
                outcomes[old.id] = RetryOutcome(
                    retry_of=old.id, action="resubmitted", job_id=accepted.job_id
                )
                store.attempts.add_note(
                    old.id, old.attempt, "retried as a new job", retried_as=str(accepted.job_id)
                )
        for rejected in submission.rejected:
            for old in by_shown.get(rejected.source, []):
                outcomes[old.id] = RetryOutcome(
                    retry_of=old.id, action="refused", code=rejected.code, message=rejected.message
                )
    return [outcomes[j.id] for j in jobs if j.id in outcomes]


def cancel_job(jobs: TenantView, job_id: UUID, publisher: Publisher | None = None) -> Job:
    """queued|retrying|running -> cancelled, when the view has the job (E108 otherwise). Only
    the row changes, as with ``doclane cancel``: a running attempt notices at its next lease
    renewal and writes nothing.

    A running job's cancel frees a running slot of its tenant at once, so its queue is rung
    (one bell): a capped tenant's next job need not wait for that renewal or the reconciler.
    A bell refused is logged; the reconciler rings within an interval."""
    jobs.require(job_id)
    cancellation = jobs.store.operations.cancel(job_id, reason="cancelled through the API")
    if cancellation is None:
        raise WrongState(f"job {job_id} is already {jobs.job(job_id).state.value}")
    if publisher is not None and cancellation.previous_state is JobState.RUNNING:
        ring(publisher, [Wakeup(cancellation.job.queue, priority=cancellation.job.priority)])
    return cancellation.job
