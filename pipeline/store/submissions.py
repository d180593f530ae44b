"""Submission: new jobs into the queue, in one transaction, or the succeeded job they repeat.

What ``pipeline.jobs`` submits through (and the API's and the CLI's submissions with it). Each
call is one transaction that waits for the disk: a job the caller was told exists is there
after a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID, uuid4

import psycopg

from pipeline.jobs import CreatedJob, NewJob
from pipeline.store.pool import StorePool
from pipeline.store.queries import query
from pipeline.store.rows import COPY_JOB_TYPES, DedupKey, canonical_json, copy_row, dedup_key


def _split(conn: psycopg.Connection, made: CreatedJob, spec: NewJob) -> CreatedJob:
    """``made`` split into ``spec.slices``: it waits, its slices are queued (migration 0017)."""
    params = {"job_id": made.job_id, "pages": list(spec.slices)}
    ids = [row[0] for row in conn.execute(query("split_job"), params).fetchall()]
    return CreatedJob(job_id=made.job_id, slice_ids=tuple(ids))


class Submissions:
    """New jobs, deduplicated against succeeded ones, through ``pool``."""

    def __init__(self, pool: StorePool) -> None:
        self.pool = pool

    def create(
        self, spec: NewJob, *, dedup: bool = True, dedup_engine: str | None = None
    ) -> CreatedJob:
        return self.create_many([spec], dedup=dedup, dedup_engine=dedup_engine)[0]

    def create_many(
        self, specs: Iterable[NewJob], *, dedup: bool = True, dedup_engine: str | None = None
    ) -> list[CreatedJob]:
        """Queue many jobs in one transaction (one COPY), in input order.

        With ``dedup``, a spec whose content hash, profile, options and formats equal those of a
        succeeded job gets that job back (``deduplicated=True``) instead of a new one; with
        ``dedup_engine`` too, only a job whose results that engine made (its name, any version,
        or its name and version, as ``results.engine`` records it). A new
        job whose spec names ``slices`` is split in the same transaction (``split_job``,
        migration 0017): it waits, and its ``slice_ids`` are the jobs to publish.
        """
        specs = list(specs)
        if not specs:
            return []
        with self.pool.connection("creating jobs") as conn, conn.transaction():
            known = self._succeeded_by_content(conn, specs, dedup_engine) if dedup else {}
            created: list[CreatedJob] = []
            rows: list[tuple[Any, ...]] = []
            for spec in specs:
                existing = known.get(dedup_key(spec)) if spec.content_sha256 else None
                if existing is not None:
                    created.append(CreatedJob(job_id=existing, deduplicated=True))
                    continue
                job_id = uuid4()
                created.append(CreatedJob(job_id=job_id))
                rows.append(copy_row(job_id, spec))
            if rows:
                with conn.cursor().copy(query("copy_jobs")) as copy:
                    copy.set_types(COPY_JOB_TYPES)
                    for row in rows:
                        copy.write_row(row)
            return [
                _split(conn, made, spec) if spec.slices and not made.deduplicated else made
                for spec, made in zip(specs, created, strict=True)
            ]

    @staticmethod
    def _succeeded_by_content(
        conn: psycopg.Connection, specs: list[NewJob], engine: str | None
    ) -> dict[DedupKey, UUID]:
        hashes = sorted({s.content_sha256 for s in specs if s.content_sha256})
        if not hashes:
            return {}
        params = {"hashes": hashes, "engine": engine or None}
        rows = conn.execute(query("find_succeeded_by_content"), params)
        return {
            (sha, profile, canonical_json(options), tuple(formats)): job_id
            for job_id, sha, profile, options, formats in rows
        }
