"""Operations on jobs from outside their attempts: an operator's cancel and retry, the
reconciler's sweeps (expired leases, claimable work, result retention, orphaned objects).

What ``doclane cancel``/``retry``, the API's and the console's actions and the reconciler
write. A change of state made here carries its reason into the job's trail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from uuid import UUID

from psycopg.rows import dict_row

from errors import PipelineError
from pipeline.jobs.model import Cancellation, ExpiredLeases, Job, JobState
from pipeline.store.pool import OnPool
from pipeline.store.queries import query

log = logging.getLogger("doclane.store")


class Operations(OnPool):
    """Operators' and the reconciler's writes, through ``pool``."""

    def make_due(self, job_id: UUID) -> bool:
        """Let a retrying job be claimed now instead of at its next_attempt_at."""
        return self.pool.update("making a job due", query("make_due"), {"job_id": job_id})

    def cancel(self, job_id: UUID, *, reason: str = "cancelled") -> Cancellation | None:
        """queued|retrying|running -> cancelled. ``None`` when the job is already finished (or
        unknown). A running job's worker finds out at its next guarded write, which fails."""
        with self.pool.because("cancelling a job", reason) as conn:
            conn.execute(query("lock_slices"), {"job_id": job_id})
            locked = conn.execute(query("lock_job_state"), {"job_id": job_id}).fetchone()
            if locked is None or JobState(locked[0]).terminal:
                return None
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(query("cancel_job"), {"job_id": job_id}).fetchone()
        if row is None:
            return None
        return Cancellation(job=Job.model_validate(row), previous_state=JobState(locked[0]))

    def requeue_expired_leases(
        self, *, now: datetime | None = None, limit: int = 1000
    ) -> ExpiredLeases:
        """Running jobs whose lease expired go back to ``queued`` (republish them), or to
        ``failed`` with E303 when that attempt was their last. One batch of at most ``limit``."""
        params = {"now": now, "limit": limit}
        with self.pool.because("requeueing expired leases", "lease expired") as conn:
            rows = conn.execute(query("requeue_expired_leases"), params).fetchall()
        return ExpiredLeases(
            requeued=tuple(r[0] for r in rows if r[1] == JobState.QUEUED),
            failed=tuple(r[0] for r in rows if r[1] == JobState.FAILED),
        )

    def running_attempts(self, job_ids: Sequence[UUID]) -> set[tuple[UUID, int]]:
        """(job id, attempt) of those of ``job_ids`` that are running now."""
        if not job_ids:
            return set()
        with self.pool.connection("reading running attempts") as conn:
            rows = conn.execute(query("running_attempts"), {"job_ids": list(job_ids)})
            return {(row[0], row[1]) for row in rows}

    def claimable_queues(self) -> dict[str, int]:
        """Jobs a drain could take now, by queue (queued jobs of tenants with room, and due
        retries): where a wake-up rings."""
        rows = self.pool.fetch_rows("reading claimable work", query("claimable_queues"), {})
        return {row["queue"]: int(row["claimable"]) for row in rows}

    def named_uploads(self, paths: Sequence[str]) -> set[str]:
        """Those of ``paths`` (files in the inbox's uploads folder) that some job names."""
        if not paths:
            return set()
        with self.pool.connection("reading which uploads jobs name") as conn:
            rows = conn.execute(query("named_uploads"), {"paths": list(paths)})
            return {row[0] for row in rows}

    def expire_results(self, cutoff: datetime, *, limit: int) -> list[tuple[UUID, str]]:
        """The retention sweep's batch: up to ``limit`` results created before ``cutoff``
        deleted, oldest first, and their jobs marked expired (a note in each history). Objects
        are deleted after the commit; one that cannot be is left to the orphan sweep, since no
        row names it any more. The (job id, format) pairs deleted."""
        params = {"cutoff": cutoff, "limit": limit}
        rows = self.pool.fetch_rows("expiring results", query("expire_results"), params)
        uris = [row["object_uri"] for row in rows if row["object_uri"]]
        if uris:
            try:
                self.pool.objects_for(uris[0]).delete(uris)
            except PipelineError as exc:
                log.warning("expired objects stay for the orphan sweep: %s", exc)
        return [(row["job_id"], row["format"]) for row in rows]

    def sweep_result_orphans(self, *, min_age: timedelta, limit: int) -> list[str]:
        """Delete objects under the result store's prefix that no row names and that are older
        than ``min_age`` (uploads whose commit never came), among ``limit`` listed keys."""
        objects = self.pool.result_objects
        if objects is None:
            return []

        def referenced(uris: list[str]) -> set[str]:
            found = self.pool.fetch_rows(
                "finding orphans", query("referenced_objects"), {"uris": uris}
            )
            return {row["object_uri"] for row in found}

        orphans = objects.orphans(referenced, min_age=min_age, limit=limit)
        if orphans:
            objects.delete(orphans)
        return orphans
