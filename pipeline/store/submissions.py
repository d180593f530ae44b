"""Submission: new jobs into the queue, in one transaction, or the succeeded job they repeat.

What ``pipeline.jobs`` submits through (and the API's and the CLI's submissions with it). Each
call is one transaction that waits for the disk: a job the caller was told exists is there
after a crash.

Each job's tenant must exist (E116) and bounds how many of its jobs may be queued
(``max_queued``). The quota is exact under concurrent submitters: the transaction that inserts
locks the tenant's row first (FOR NO KEY UPDATE: the claim's and the foreign keys' weaker locks
pass by), and only then counts the tenant's queued jobs (its lanes, kept by the triggers of
migration 0019), so a second submission of the same tenant counts after the first committed.
A deduplicated source makes no job and costs nothing; a document split into slices costs one
(its slices, once queued, count each in the tenant's queued figure, as a worker sees them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID, uuid4

import psycopg

from errors import TenantQueueFull, UnknownTenant
from pipeline.jobs.model import CreatedJob, NewJob
from pipeline.store.pool import OnPool
from pipeline.store.queries import query
from pipeline.store.rows import COPY_JOB_TYPES, DedupKey, canonical_json, copy_row, dedup_key


def _split(conn: psycopg.Connection, made: CreatedJob, spec: NewJob) -> CreatedJob:
    """``made`` split into ``spec.slices``: it waits, its slices are queued (migration 0017)."""
    params = {"job_id": made.job_id, "pages": list(spec.slices)}
    ids = [row[0] for row in conn.execute(query("split_job"), params).fetchall()]
    return CreatedJob(job_id=made.job_id, slice_ids=tuple(ids))


class Submissions(OnPool):
    """New jobs, deduplicated against succeeded ones, through ``pool``."""

    def create(
        self, spec: NewJob, *, dedup: bool = True, dedup_engine: str | None = None
    ) -> CreatedJob:
        return self.create_many([spec], dedup=dedup, dedup_engine=dedup_engine)[0]

    def create_many(
        self, specs: Iterable[NewJob], *, dedup: bool = True, dedup_engine: str | None = None
    ) -> list[CreatedJob]:
        """Queue many jobs in one transaction (one COPY), in input order; all or none.

        With ``dedup``, a spec whose content hash, profile, options, formats and tenant equal
        those of a succeeded job gets that job back (``deduplicated=True``) instead of a new
        one; with ``dedup_engine`` too, only a job whose results that engine made (its name, any
        version, or its name and version, as ``results.engine`` records it). A new job whose
        spec names ``slices`` is split in the same transaction (``split_job``, migration 0017):
        it waits, and its ``slice_ids`` are the jobs to publish. E116 when a spec's tenant does
        not exist; E115 (nothing made) when the jobs would take a tenant past its
        ``max_queued``: :meth:`admit` makes those within the quota instead.
        """
        made = self.admit(specs, dedup=dedup, dedup_engine=dedup_engine, whole=True)
        return [m for m in made if m is not None]

    def admit(
        self,
        specs: Iterable[NewJob],
        *,
        dedup: bool = True,
        dedup_engine: str | None = None,
        whole: bool = False,
    ) -> list[CreatedJob | None]:
        """:meth:`create_many`, but a spec past its tenant's quota is refused alone: None in
        its place (in input order, the first ones within the quota are made). With ``whole``,
        any refusal refuses all (E115, the transaction rolled back)."""
        specs = list(specs)
        if not specs:
            return []
        with self.pool.connection("creating jobs") as conn, conn.transaction():
            room = self._lock_quotas(conn, {spec.tenant for spec in specs})
            known = self._succeeded_by_content(conn, specs, dedup_engine) if dedup else {}
            created: list[CreatedJob | None] = []
            rows: list[tuple[Any, ...]] = []
            # Ids in ascending order, given in the sources' order: the jobs of one chunk share
            # their created_at, and the id breaks the tie wherever jobs are taken oldest first
            # (a tenant's lane, a round's and a batch's companions), so they are taken in the
            # order they were submitted, not at random: a batch of neighbours (often one
            # format: one pipeline for the directory call to build) rather than a mix.
            ids = iter(sorted(uuid4() for _ in specs))
            for spec in specs:
                existing = known.get(dedup_key(spec)) if spec.content_sha256 else None
                if existing is not None:
                    created.append(CreatedJob(job_id=existing, deduplicated=True))
                    continue
                left = room.get(spec.tenant)
                if left is not None:
                    if left <= 0:
                        if whole:
                            raise _queue_full(spec.tenant)
                        created.append(None)
                        continue
                    room[spec.tenant] = left - 1
                job_id = next(ids)
                created.append(CreatedJob(job_id=job_id))
                rows.append(copy_row(job_id, spec))
            if rows:
                with conn.cursor().copy(query("copy_jobs")) as copy:
                    copy.set_types(COPY_JOB_TYPES)
                    for row in rows:
                        copy.write_row(row)
            return [
                _split(conn, made, spec)
                if made is not None and spec.slices and not made.deduplicated
                else made
                for spec, made in zip(specs, created, strict=True)
            ]

    @staticmethod
    def _lock_quotas(conn: psycopg.Connection, tenants: set[str]) -> dict[str, int | None]:
        """Each tenant's row locked (in name order: two submissions never deadlock), then the
        jobs each may still queue (None: no quota). E116 for a tenant that does not exist."""
        room: dict[str, int | None] = {}
        for tenant in sorted(tenants):
            row = conn.execute(query("tenant_quota"), {"name": tenant}).fetchone()
            if row is not None and row[0] is not None:
                row = conn.execute(query("lock_tenant_quota"), {"name": tenant}).fetchone()
            if row is None:
                raise UnknownTenant(
                    f"no tenant {tenant!r} (doclane tenants list shows them; an operator makes "
                    "one with doclane tenants set)",
                    detail={"tenant": tenant},
                )
            if row[0] is None:
                room[tenant] = None
                continue
            queued = conn.execute(query("tenant_queued"), {"name": tenant}).fetchone()
            room[tenant] = max(int(row[0]) - int(queued[0] if queued else 0), 0)
        return room

    @staticmethod
    def _succeeded_by_content(
        conn: psycopg.Connection, specs: list[NewJob], engine: str | None
    ) -> dict[DedupKey, UUID]:
        hashes = sorted({s.content_sha256 for s in specs if s.content_sha256})
        if not hashes:
            return {}
        tenants = sorted({s.tenant for s in specs})
        params = {"hashes": hashes, "engine": engine or None, "tenants": tenants}
        rows = conn.execute(query("find_succeeded_by_content"), params)
        return {
            (sha, profile, canonical_json(options), tuple(formats), tenant): job_id
            for job_id, sha, profile, options, formats, tenant in rows
        }


def _queue_full(tenant: str) -> TenantQueueFull:
    return TenantQueueFull(
        f"tenant {tenant!r} has as many jobs queued as its quota (max_queued) allows",
        detail={"tenant": tenant},
    )
