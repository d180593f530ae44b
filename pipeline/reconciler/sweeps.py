"""The reconciler: PostgreSQL is the queue, so a pass only mends what no drain can.

Workers die mid-job and bells get lost (a broker restart without persistence, a flushed Redis,
a publish that failed after the commit, a worker killed holding its bell). One pass, each step
a bounded batch safe to run from several processes at once (the store takes rows with SKIP
LOCKED):

1. running jobs whose lease expired (their worker is gone) go back to ``queued``; on their
   last attempt they fail with E303 instead;
2. every queue with claimable work (queued jobs of tenants with room, or retries that are
   due) and no bell waiting in the broker is rung (:func:`pipeline.queues.wake`), so a bell
   lost, flushed or never rung delays work by one interval at most, and a doubled one costs
   an empty claim; nothing is owed, so nothing is counted;
3. the inbox is swept of the scratch folders and partial downloads killed workers left
   (:mod:`pipeline.processing.scratch`) and of the uploads no job names (:mod:`.uploads`);
   results older than ``DOCLANE_RESULT_RETENTION`` are deleted (their jobs keep their rows and
   history and say "expired"), audit entries older than ``DOCLANE_AUDIT_RETENTION_DAYS`` (and
   submissions' Idempotency-Keys older than a day), and result objects no row names (a commit
   that never came) once older than ``DOCLANE_RECONCILE_ORPHAN_MIN_AGE_S``.

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
from pipeline.queues import Publisher, wake
from pipeline.reconciler.uploads import sweep_uploads
from pipeline.store.store import JobStore

log = logging.getLogger("doclane.reconcile")


@dataclass(slots=True)
class ReconcileReport:
    requeued: list[UUID] = field(default_factory=list)
    failed: list[UUID] = field(default_factory=list)
    #: Bells rung, by queue: claimable work waited there and no bell did.
    rung: dict[str, int] = field(default_factory=dict)
    #: Queues with claimable work whose bell the broker refused (rung again next pass).
    publish_failures: dict[str, str] = field(default_factory=dict)
    #: Scratch folders and partial downloads of attempts that no longer run, removed.
    swept: list[Path] = field(default_factory=list)
    #: Upload folders no job names, removed.
    uploads: list[Path] = field(default_factory=list)
    #: Result objects no row names (a commit that never came), deleted.
    orphans: list[str] = field(default_factory=list)
    #: Results older than DOCLANE_RESULT_RETENTION, deleted: (job id, format).
    expired: list[tuple[UUID, str]] = field(default_factory=list)
    #: Audit entries older than DOCLANE_AUDIT_RETENTION_DAYS, deleted.
    audit_pruned: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.requeued or self.failed or self.rung or self.publish_failures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "requeued_expired_leases": [str(i) for i in self.requeued],
            "failed_expired_leases": [str(i) for i in self.failed],
            "rung": dict(self.rung),
            "publish_failures": dict(self.publish_failures),
            "swept": [str(p) for p in self.swept],
            "removed_uploads": [str(p) for p in self.uploads],
            "orphan_objects": list(self.orphans),
            "expired_results": [{"job_id": str(j), "format": f} for j, f in self.expired],
            "audit_pruned": self.audit_pruned,
        }


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
    """One pass (see the module docstring); sweeps ``inbox_dir`` of what dead attempts left."""
    cfg = settings or ReconcileSettings.from_environment()
    report = ReconcileReport()
    if inbox_dir is not None:
        report.swept = sweep_scratch(
            inbox_dir, store.operations.running_attempts, min_age_s=cfg.reconcile_scratch_min_age_s
        )
        report.uploads = sweep_uploads(
            inbox_dir,
            store.operations.named_uploads,
            min_age_s=cfg.reconcile_upload_min_age_s,
            limit=cfg.reconcile_batch,
        )
    _sweep_results(store, cfg, report)
    report.audit_pruned = store.audit.prune(cfg.audit_retention_days * 86400.0)
    expired = store.operations.requeue_expired_leases(limit=cfg.reconcile_batch)
    report.requeued = list(expired.requeued)
    report.failed = list(expired.failed)
    report.rung, report.publish_failures = wake(publisher, store.operations.claimable_queues())
    if report.failed:
        log.warning("%d job(s) failed: lease expired on their last attempt", len(report.failed))
    if report.changed:
        log.info(
            "reconciled: %d lease(s) expired and requeued, bells rung on %s",
            len(report.requeued),
            ", ".join(f"{q} ({n})" for q, n in report.rung.items()) or "no queue",
        )
    return report
