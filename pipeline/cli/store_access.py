"""How commands reach the job store: opened around the command, and the arguments that pick jobs.

Every command that reads or writes jobs opens its store through :func:`open_store`, which
reports a catalog error (the database unreachable, its schema missing: "run ``doclane db
migrate``") as ``output.fail`` does, and closes the store whatever happens. A job's id (or a
unique prefix of it, as the console shows ids) and the filters of ``doclane jobs`` and
``doclane retry --failed`` are checked here, a bad one being a usage error (E117); an id no
job has is E108, a prefix more than one has E121.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import NoReturn
from uuid import UUID

from errors import PipelineError
from pipeline.jobs.model import Job, JobState
from pipeline.jobs.tenants import EVERY_TENANT
from pipeline.store.admin import JobFilter
from pipeline.store.scoped import TenantView, no_job
from pipeline.store.store import JobStore

from .output import fail, usage_error
from .settings import command_settings

_ERROR_CODE = re.compile(r"^E\d{3}$")


@contextmanager
def open_store(as_json: bool) -> Iterator[JobStore]:
    """The job store of the configured database that explains a missing schema; a catalog
    error raised while it is open ends the command (exit 1), and the store is closed."""
    try:
        store = JobStore(command_settings().store, explain_missing_schema=True)
    except PipelineError as exc:
        fail(exc, as_json)
    try:
        yield store
    except PipelineError as exc:
        fail(exc, as_json)
    finally:
        store.close()


def parse_job_id(store: JobStore, text: str, as_json: bool) -> UUID:
    """The job ``text`` names: its id or a unique prefix of it (``Reads.job_id``); not an id
    is a usage error, a prefix no job or many jobs have E108 or E121 (through
    :func:`open_store`)."""
    try:
        return store.reads.job_id(text)
    except ValueError as exc:
        usage_error(str(exc), as_json)


def parse_submission_id(store: JobStore, text: str, as_json: bool) -> UUID:
    """The submission ``text`` names, as :func:`parse_job_id`."""
    try:
        return store.reads.submission_id(text)
    except ValueError as exc:
        usage_error(str(exc), as_json)


def every_tenants_jobs(store: JobStore) -> TenantView:
    """The jobs the command line sees: every tenant's (it holds the database's credentials, so
    a wall here would keep out no one)."""
    return TenantView(store, EVERY_TENANT)


def no_such_job(jid: UUID, as_json: bool) -> NoReturn:
    """E108, as the API answers it (404)."""
    fail(no_job(jid), as_json)


def get_job(store: JobStore, jid: UUID, as_json: bool) -> Job:
    """The job, or E108 (exit 1) when there is none."""
    job = store.reads.get_job(jid)
    if job is None:
        no_such_job(jid, as_json)
    return job


def job_filter(
    state: JobState | None,
    *,
    error_code: str | None,
    since: str | None,
    queue: str | None,
    limit: int,
    as_json: bool,
) -> JobFilter:
    """The filters of ``jobs`` and ``retry --failed``, checked; a bad one is a usage error."""
    # pipeline.admin loads the MCP and breaker packages (Redis, jsonschema): imported when a
    # command filters, so that ``doclane submit`` never pays for them.
    from pipeline.admin.jobs import parse_since

    if error_code is not None and not _ERROR_CODE.match(error_code.upper()):
        usage_error(f"not an error code: {error_code!r} (e.g. E101)", as_json)
    moment: datetime | None = None
    if since is not None:
        try:
            moment = parse_since(since)
        except ValueError as exc:
            usage_error(str(exc), as_json)
    return JobFilter(
        state=state,
        error_code=error_code.upper() if error_code else None,
        since=moment,
        queue=queue,
        limit=limit,
    )
