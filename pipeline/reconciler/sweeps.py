"""The reconciler: brings the broker back in line with PostgreSQL, the source of truth.

Messages get lost (a broker restart without persistence, a flushed Redis, a publish that failed
after the commit, a worker killed with its prefetched messages) and workers die mid-job. One
pass does three sweeps, each a bounded batch that is safe to run from several processes at once
(the store takes rows with SKIP LOCKED):

1. running jobs whose lease expired (their worker is gone) go back to ``queued`` and get a new
   message; on their last attempt they fail with E303 instead;
2. queued or retrying jobs overdue by more than a threshold (their message is presumed lost)
   get a new message, but only on queues the broker reports empty: in a backlog every queued
   row is "old" and its message is simply still in line, and republishing it every threshold
   would grow the queue without end. Lost messages on a busy queue are republished once it
   drains. A duplicate message is harmless anyway: the claim is a guarded UPDATE (and refuses
   a retrying job before its due time), and the loser of a race finds nothing to claim.
3. sooner than that threshold, queued jobs a queue has more of (overdue by a short threshold,
   ``DOCLANE_RECONCILE_LOST_AFTER_S``) than the broker holds claim rights for (its messages
   times the jobs a message on it stands for, ``pipeline.queues.jobs_per_message``): the
   difference was lost (a broker restarted without persistence, a flushed queue), and that
   many of the oldest get new messages. A queued job's claim right is in the queue or being
   worked on: apart from the moment between a worker's taking a message and its claim, and
   a message sent back to wait out open circuits (whose job is then not due before it comes
   back), only a lost message leaves a queued job without one. A retrying job's message waits
   out its countdown in a worker, where no broker counts it, and runs once due: one overdue by
   the same short threshold was lost with its worker (killed, or cut from a restarted broker),
   and gets a new message too (a pool busy with long jobs may only be late with it: the
   duplicate then runs on whichever worker is free first, and the other finds nothing to
   claim). A queue with a batch or more of messages waiting is left to sweep 2 (a backlog: its
   lost messages are republished once it drains), which also bounds this sweep's reading.

4. messages owed to the queues (a claim that found only jobs of tenants paused or at their
   running cap was acknowledged, and its queue owed one) are published for the tenants that
   have room again: kills, cancels, lease expiries and changed caps free room without a job's
   end in a worker, which repays the rest (:mod:`.owed`). Sweeps 2 and 3 leave alone the jobs
   of tenants paused or at their cap (they wait for room, not for a message), and sweep 3
   counts a queue's owed messages with the broker's.

A pass also sweeps the inbox of the scratch folders and partial downloads that killed workers
left behind (:mod:`pipeline.processing.scratch`), when it is given the inbox; deletes results
older than ``DOCLANE_RESULT_RETENTION`` (their jobs keep their rows and history and say
"expired"); deletes audit entries older than ``DOCLANE_AUDIT_RETENTION_DAYS`` (and
submissions' Idempotency-Keys older than a day); and deletes result objects no row names
(uploaded by a worker killed before its commit), once older than
``DOCLANE_RECONCILE_ORPHAN_MIN_AGE_S``. Each is a bounded batch.

Beat runs a pass every ``DOCLANE_RECONCILE_INTERVAL_S``; ``doclane reconcile`` runs one by hand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from errors import ResultStoreUnavailable
from pipeline.jobs.settings import ReconcileSettings
from pipeline.processing.scratch import sweep_scratch
from pipeline.queues import JOB_QUEUES, Publisher, jobs_per_message, messages_for
from pipeline.reconciler.owed import repay_owed
from pipeline.store import JobStore
from pipeline.submission.publishing import publish_all

log = logging.getLogger("doclane.reconcile")


@dataclass(slots=True)
class ReconcileReport:
    requeued: list[UUID] = field(default_factory=list)
    failed: list[UUID] = field(default_factory=list)
    republished: list[UUID] = field(default_factory=list)
    #: Jobs taken by the third sweep: queued ones beyond the messages of their queue, and
    #: retrying ones overdue by the same short threshold.
    lost: list[UUID] = field(default_factory=list)
    publish_failures: dict[UUID, str] = field(default_factory=dict)
    #: Owed messages published: tenants paused or at their cap had room again.
    repaid: int = 0
    #: Queues skipped by the stale sweep: messages were still waiting in them.
    busy_queues: list[str] = field(default_factory=list)
    #: Scratch folders and partial downloads of attempts that no longer run, removed.
    swept: list[Path] = field(default_factory=list)
    #: Result objects no row names (a commit that never came), deleted.
    orphans: list[str] = field(default_factory=list)
    #: Results older than DOCLANE_RESULT_RETENTION, deleted: (job id, format).
    expired: list[tuple[UUID, str]] = field(default_factory=list)
    #: Audit entries older than DOCLANE_AUDIT_RETENTION_DAYS, deleted.
    audit_pruned: int = 0

    @property
    def changed(self) -> bool:
        return bool(
            self.requeued
            or self.failed
            or self.republished
            or self.lost
            or self.publish_failures
            or self.repaid
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requeued_expired_leases": [str(i) for i in self.requeued],
            "failed_expired_leases": [str(i) for i in self.failed],
            "republished": [str(i) for i in self.republished],
            "lost_messages": [str(i) for i in self.lost],
            "publish_failures": {str(k): v for k, v in self.publish_failures.items()},
            "busy_queues": list(self.busy_queues),
            "repaid_owed_messages": self.repaid,
            "swept": [str(p) for p in self.swept],
            "orphan_objects": list(self.orphans),
            "expired_results": [{"job_id": str(j), "format": f} for j, f in self.expired],
            "audit_pruned": self.audit_pruned,
        }


def _queue_depths(publisher: Publisher) -> dict[str, int | None]:
    """Messages waiting in each job queue (None: the broker cannot say)."""
    depths: dict[str, int | None] = {}
    for queue in JOB_QUEUES:
        try:
            depths[queue] = publisher.waiting(queue)
        except Exception as exc:  # the broker cannot say: judge by the database alone
            log.warning("cannot read the depth of %s: %s", queue, exc)
            depths[queue] = None
    return depths


def _lost_queued(
    store: JobStore, depths: dict[str, int | None], cfg: ReconcileSettings
) -> list[UUID]:
    """Sweep 3: queued jobs beyond the messages their queue holds, and retrying jobs overdue,
    on queues whose depth is known and below a batch (see the module docstring)."""
    lost: list[UUID] = []
    judged = [q for q, depth in depths.items() if depth is not None and depth < cfg.reconcile_batch]
    threshold = timedelta(seconds=cfg.reconcile_lost_after_s)
    owed = store.operations.owed_by_queue() if judged else {}
    for queue in judged:
        # claim rights, not messages: each message on a queue stands for as many of its jobs
        waiting = ((depths[queue] or 0) + owed.get(queue, 0)) * jobs_per_message(queue)
        lost += store.operations.lost_queued(
            queue, waiting=waiting, older_than=threshold, limit=cfg.reconcile_batch
        )
    if judged:
        lost += store.operations.stale_queued(
            threshold, limit=cfg.reconcile_batch, queues=judged, states=["retrying"]
        )
    return lost


def _sweep_results(store: JobStore, cfg: ReconcileSettings, report: ReconcileReport) -> None:
    """Retention, then orphaned result objects, a bounded batch each; an object store that
    fails (E402) is logged and tried again next pass, never stopping the job sweeps."""
    try:
        if cfg.result_retention is not None:
            cutoff = datetime.now(UTC) - cfg.result_retention
            report.expired = store.operations.expire_results(cutoff, limit=cfg.reconcile_batch)
        report.orphans = store.operations.sweep_result_orphans(
            min_age=timedelta(seconds=cfg.reconcile_orphan_min_age_s), limit=cfg.reconcile_batch
        )
    except ResultStoreUnavailable as exc:
        log.warning("result sweeps skipped this pass: %s", exc)
    if report.expired or report.orphans:
        log.info(
            "results: %d expired, %d orphaned object(s) deleted",
            len(report.expired),
            len(report.orphans),
        )


def reconcile_once(
    store: JobStore,
    publisher: Publisher,
    settings: ReconcileSettings | None = None,
    *,
    inbox_dir: Path | None = None,
) -> ReconcileReport:
    """One pass of the three sweeps; publishes a message for every job it brought back; sweeps
    ``inbox_dir`` of what dead attempts left there."""
    cfg = settings or ReconcileSettings.from_environment()
    report = ReconcileReport()
    if inbox_dir is not None:
        report.swept = sweep_scratch(
            inbox_dir, store.operations.running_attempts, min_age_s=cfg.reconcile_scratch_min_age_s
        )
    _sweep_results(store, cfg, report)
    report.audit_pruned = store.audit.prune(cfg.audit_retention_days * 86400.0)
    expired = store.operations.requeue_expired_leases(limit=cfg.reconcile_batch)
    report.requeued = list(expired.requeued)
    report.failed = list(expired.failed)
    report.repaid = repay_owed(store.operations, publisher)
    depths = _queue_depths(publisher)
    busy = [queue for queue, depth in depths.items() if depth]
    stale = store.operations.stale_queued(
        timedelta(seconds=cfg.reconcile_stale_after_s),
        limit=cfg.reconcile_batch,
        queues=[q for q in JOB_QUEUES if q not in busy] if busy else None,
    )
    report.busy_queues = busy
    report.lost = _lost_queued(store, depths, cfg)
    wanted = list(dict.fromkeys([*report.requeued, *stale, *report.lost]))
    jobs = sorted(store.reads.get_jobs(wanted), key=lambda j: (-j.priority, j.created_at))
    messages = messages_for((job.id, job.queue, job.priority) for job in jobs)
    published = publish_all(publisher, messages)
    report.republished = list(published.published)
    report.publish_failures = published.failed
    if report.failed:
        log.warning("%d job(s) failed: lease expired on their last attempt", len(report.failed))
    if report.changed:
        log.info(
            "reconciled: %d lease(s) expired and requeued, %d stale job(s), %d lost message(s), "
            "%d message(s) published, %d publish failure(s)",
            len(report.requeued),
            len(stale),
            len(report.lost),
            len(report.republished),
            len(report.publish_failures),
        )
    return report
