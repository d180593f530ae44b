"""The reconciler: brings the broker back in line with PostgreSQL, the source of truth.

Messages get lost (a broker restart without persistence, a flushed Redis, a publish that failed
after the commit, a worker killed with its prefetched messages) and workers die mid-job. One
pass does two sweeps, each a bounded batch that is safe to run from several processes at once
(the store takes rows with SKIP LOCKED):

1. running jobs whose lease expired (their worker is gone) go back to ``queued`` and get a new
   message; on their last attempt they fail with E303 instead;
2. queued or retrying jobs overdue by more than a threshold (their message is presumed lost)
   get a new message, but only on queues the broker reports empty: in a backlog every queued
   row is "old" and its message is simply still in line, and republishing it every threshold
   would grow the queue without end. Lost messages on a busy queue are republished once it
   drains. A duplicate message is harmless anyway: the claim is a guarded UPDATE (and refuses
   a retrying job before its due time), and the loser of a race finds nothing to claim.

A pass also sweeps the inbox of the scratch folders and partial downloads that killed workers
left behind (:mod:`pipeline.processing.scratch`), when it is given the inbox.

Beat runs a pass every ``DOCLANE_RECONCILE_INTERVAL_S``; ``doclane reconcile`` runs one by hand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.jobs.publishing import publish_all
from pipeline.processing.scratch import sweep_scratch
from pipeline.queues import JOB_QUEUES, JobMessage, Publisher
from pipeline.store import JobStore

log = logging.getLogger("doclane.reconcile")


class ReconcileSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DOCLANE_", env_file=".env", extra="ignore", frozen=True, env_ignore_empty=True
    )

    #: How often beat runs a pass.
    reconcile_interval_s: float = Field(default=30.0, gt=0)
    #: How long past its due time a queued/retrying job may wait before it is republished.
    #: Longer than a normal queue wait, or busy queues get duplicate (harmless) messages.
    reconcile_stale_after_s: float = Field(default=300.0, gt=0)
    #: Rows per sweep; a backlog larger than this is worked off over several passes.
    reconcile_batch: int = Field(default=1000, ge=1)
    #: A scratch folder or partial download younger than this is never swept.
    reconcile_scratch_min_age_s: float = Field(default=60.0, ge=0)


def load_reconcile_settings(**overrides: Any) -> ReconcileSettings:
    return ReconcileSettings(**overrides)


@dataclass(slots=True)
class ReconcileReport:
    requeued: list[UUID] = field(default_factory=list)
    failed: list[UUID] = field(default_factory=list)
    republished: list[UUID] = field(default_factory=list)
    publish_failures: dict[UUID, str] = field(default_factory=dict)
    #: Queues skipped by the stale sweep: messages were still waiting in them.
    busy_queues: list[str] = field(default_factory=list)
    #: Scratch folders and partial downloads of attempts that no longer run, removed.
    swept: list[Path] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.requeued or self.failed or self.republished or self.publish_failures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "requeued_expired_leases": [str(i) for i in self.requeued],
            "failed_expired_leases": [str(i) for i in self.failed],
            "republished": [str(i) for i in self.republished],
            "publish_failures": {str(k): v for k, v in self.publish_failures.items()},
            "busy_queues": list(self.busy_queues),
            "swept": [str(p) for p in self.swept],
        }


def _busy_queues(publisher: Publisher) -> list[str]:
    """Job queues with messages waiting in the broker (unknown counts as empty)."""
    busy = []
    for queue in JOB_QUEUES:
        try:
            depth = publisher.waiting(queue)
        except Exception as exc:  # the broker cannot say: judge by the database alone
            log.warning("cannot read the depth of %s: %s", queue, exc)
            depth = None
        if depth:
            busy.append(queue)
    return busy


def reconcile_once(
    store: JobStore,
    publisher: Publisher,
    settings: ReconcileSettings | None = None,
    *,
    inbox_dir: Path | None = None,
) -> ReconcileReport:
    """One pass of both sweeps; publishes a message for every job it brought back; sweeps
    ``inbox_dir`` of what dead attempts left there."""
    cfg = settings or load_reconcile_settings()
    report = ReconcileReport()
    if inbox_dir is not None:
        report.swept = sweep_scratch(
            inbox_dir, store.running_attempts, min_age_s=cfg.reconcile_scratch_min_age_s
        )
    expired = store.requeue_expired_leases(limit=cfg.reconcile_batch)
    report.requeued = list(expired.requeued)
    report.failed = list(expired.failed)
    busy = _busy_queues(publisher)
    stale = store.stale_queued(
        timedelta(seconds=cfg.reconcile_stale_after_s),
        limit=cfg.reconcile_batch,
        queues=[q for q in JOB_QUEUES if q not in busy] if busy else None,
    )
    report.busy_queues = busy
    wanted = list(dict.fromkeys([*report.requeued, *stale]))
    jobs = sorted(store.get_jobs(wanted), key=lambda j: (-j.priority, j.created_at))
    messages = [JobMessage(job.id, job.queue, priority=job.priority) for job in jobs]
    published = publish_all(publisher, messages)
    report.republished = list(published.published)
    report.publish_failures = published.failed
    if report.failed:
        log.warning("%d job(s) failed: lease expired on their last attempt", len(report.failed))
    if report.changed:
        log.info(
            "reconciled: %d lease(s) expired and requeued, %d stale job(s), %d message(s) "
            "published, %d publish failure(s)",
            len(report.requeued),
            len(stale),
            len(report.republished),
            len(report.publish_failures),
        )
    return report
