"""Operations on jobs from outside their attempts: an operator's cancel and retry, the
reconciler's sweeps (expired leases, lost messages, result retention, orphaned objects).

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
from pipeline.jobs import Cancellation, ExpiredLeases, Job, JobState
from pipeline.queues import JobMessage
from pipeline.store.debts import owed_by_queue, take_owed
from pipeline.store.pool import StorePool
from pipeline.store.queries import query

log = logging.getLogger("doclane.store")


class Operations:
    """Operators' and the reconciler's writes, through ``pool``."""

    def __init__(self, pool: StorePool) -> None:
        self.pool = pool

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

    def named_uploads(self, paths: Sequence[str]) -> set[str]:
        """Those of ``paths`` (files in the inbox's uploads folder) that some job names."""
        if not paths:
            return set()
        with self.pool.connection("reading which uploads jobs name") as conn:
            rows = conn.execute(query("named_uploads"), {"paths": list(paths)})
            return {row[0] for row in rows}

    def stale_queued(
        self,
        older_than: timedelta,
        *,
        now: datetime | None = None,
        limit: int = 1000,
        queues: Sequence[str] | None = None,
        states: Sequence[str] | None = None,
    ) -> list[UUID]:
        """Queued or retrying jobs overdue by more than ``older_than``: their message is presumed
        lost, the reconciler republishes them. Taking them restarts their clock (and notes it in
        their trail), so the next sweep does not republish them again before another
        ``older_than`` has passed. ``queues`` limits the sweep (None: every queue), ``states``
        to ``queued`` or ``retrying`` jobs (None: both)."""
        params = {
            "now": now,
            "older_than_s": older_than.total_seconds(),
            "limit": limit,
            "queues": list(queues) if queues is not None else None,
            "states": list(states) if states is not None else None,
        }
        with self.pool.connection("finding stale jobs") as conn:
            return [r[0] for r in conn.execute(query("take_stale_waiting"), params)]

    def lost_queued(
        self,
        queue: str,
        *,
        waiting: int,
        older_than: timedelta,
        now: datetime | None = None,
        limit: int = 1000,
    ) -> list[UUID]:
        """Queued jobs of ``queue`` overdue by more than ``older_than`` beyond the ``waiting``
        messages the broker holds for it, oldest first: their messages are presumed lost (see
        sql/reconciler.sql). Taking them restarts their clock and notes it in their trail."""
        params = {
            "queue": queue,
            "waiting": waiting,
            "older_than_s": older_than.total_seconds(),
            "now": now,
            "limit": limit,
        }
        with self.pool.connection("finding jobs whose message was lost") as conn:
            return [r[0] for r in conn.execute(query("take_lost_queued"), params)]

    def take_owed(self, limit: int) -> list[JobMessage]:
        """Messages owed to the queues that may be published now (:mod:`.debts`)."""
        return take_owed(self.pool, limit)

    def owed_by_queue(self) -> dict[str, int]:
        """The messages each queue is owed (:mod:`.debts`)."""
        return owed_by_queue(self.pool)

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
