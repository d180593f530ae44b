"""The jobs as one caller may see them: the wall between tenants, in one place.

A :class:`TenantView` is the store seen through a :class:`~pipeline.jobs.tenants.TenantScope`: the
API's and the console's reads of a job, its trail, its results, the lists, the counts and the
figures go through it, and so do the targets of cancel and retry (``pipeline.admin`` takes a
view, not the store). A tenant's view answers another tenant's job exactly as a job that does
not exist (E108, the same words), so nobody learns which ids are taken; an id's prefix is
resolved among the tenant's own jobs only (``sql/ids.sql``); a list asked for another tenant's
jobs is empty. A view of :data:`~pipeline.jobs.tenants.EVERY_TENANT` reads as the store does,
with no query added.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import BinaryIO
from uuid import UUID

from errors import JobNotFound
from pipeline.jobs.model import Job, JobEvent, JobState, ResultInfo
from pipeline.jobs.tenants import TenantFigures, TenantScope
from pipeline.store.admin import JobFilter
from pipeline.store.store import JobStore


def no_job(job_id: UUID) -> JobNotFound:
    """E108 about ``job_id``: what an absent job and another tenant's are both answered."""
    return JobNotFound(f"no job {job_id}", detail={"job_id": str(job_id)})


class TenantView:
    """``store``'s jobs that ``scope`` covers. One a request (it remembers the jobs it has
    shown the caller, so a job's page checks its tenant once); safe to drop at any time."""

    def __init__(self, store: JobStore, scope: TenantScope) -> None:
        self._store = store
        self.scope = scope
        self._seen: set[UUID] = set()

    @property
    def store(self) -> JobStore:
        """The whole store, for the writes of an action (``pipeline.admin``'s cancel and
        retry) once :meth:`job` has shown that its target is the caller's."""
        return self._store

    # ---- ids -----------------------------------------------------------------------------------
    def job_id(self, text: str) -> UUID:
        """The job ``text`` names (an id, or a unique prefix among the scope's jobs):
        ``ValueError`` for no id, E108 for none, E121 for more than one."""
        return self._store.reads.job_id(text, tenant=self.scope.tenant)

    def submission_id(self, text: str) -> UUID:
        """The submission ``text`` names, as :meth:`job_id`."""
        return self._store.reads.submission_id(text, tenant=self.scope.tenant)

    # ---- one job -------------------------------------------------------------------------------
    def job(self, job_id: UUID) -> Job:
        """The job, when it exists for this scope; E108 otherwise, absent or not its tenant's."""
        job = self._store.reads.get_job(job_id)
        if job is None or not self.scope.covers(job.tenant):
            raise no_job(job_id)
        self._seen.add(job_id)
        return job

    def require(self, job_id: UUID) -> None:
        """E108 unless the job is the scope's: what an action checks before it writes (every
        tenant's scope asks nothing; whoever writes says E108 when there is no job)."""
        if not self.scope.every and job_id not in self._seen:
            self.job(job_id)

    def events(self, job_id: UUID) -> list[JobEvent]:
        self.require(job_id)
        return self._store.reads.events(job_id)

    def results(self, job_id: UUID) -> list[ResultInfo]:
        self.require(job_id)
        return self._store.reads.list_results(job_id)

    def result_text(self, job_id: UUID, fmt: str) -> str | None:
        """One result as text (``Reads.get_result``)."""
        self.require(job_id)
        return self._store.reads.get_result(job_id, fmt)

    def write_result(self, job_id: UUID, fmt: str, out: BinaryIO) -> int | None:
        """One result's bytes into ``out`` (``Reads.write_result``)."""
        self.require(job_id)
        return self._store.reads.write_result(job_id, fmt, out)

    def check_not_expired(self, job_id: UUID, fmt: str | None = None) -> None:
        """E113 when the job's results (``fmt``'s) were deleted by the retention sweep."""
        self.require(job_id)
        self._store.reads.check_not_expired(job_id, fmt)

    # ---- many jobs -----------------------------------------------------------------------------
    def jobs(self, job_ids: Iterable[UUID]) -> list[Job]:
        """Those of ``job_ids`` that exist for this scope, in the order asked."""
        found = self._store.reads.get_jobs(job_ids)
        return [job for job in found if self.scope.covers(job.tenant)]

    def list_jobs(self, filters: JobFilter) -> list[Job]:
        """``AdminStore.list_jobs`` within the scope: a filter naming another tenant finds
        nothing (its jobs do not exist here); none names the scope's tenant."""
        if self.scope.every:
            return self._store.admin.list_jobs(filters)
        if filters.tenant is not None and filters.tenant != self.scope.tenant:
            return []
        return self._store.admin.list_jobs(replace(filters, tenant=self.scope.tenant))

    def count_in_flight(self) -> dict[JobState, int]:
        """The scope's queued, waiting, running and retrying jobs right now."""
        return self._store.reads.count_in_flight(self.scope.tenant)

    def tenant_figures(self) -> list[TenantFigures]:
        """Each tenant of the scope with its jobs' figures (``Tenants.figures``)."""
        return self._store.tenants.figures(self.scope.tenant)
