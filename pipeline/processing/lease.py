"""Keeping a running job's lease alive, and noticing when the job is no longer ours.

Every few seconds (``DOCLANE_CANCEL_CHECK_S``, at most a third of the lease) the lease is
renewed. Renewal is a guarded write: when it matches no row, the job was cancelled or requeued
by the reconciler (this worker looked dead). The keeper then calls ``on_lost`` (the processor
cancels the attempt's MCP call with it) and the processor stops at its next step instead of
doing work nobody will keep.

The renewals of all of a process's attempts run on the process's one timer thread
(:mod:`.timers`), not on a thread per attempt: starting and joining a thread for every job cost
more than the job's whole bookkeeping against a fast server, and nearly all jobs end before their
first renewal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextvars import copy_context
from typing import Protocol
from uuid import UUID

from errors import PipelineError
from pipeline.jobs.model import Job
from pipeline.processing.settings import ProcessingSettings
from pipeline.processing.timers import TimerEntry, process_timers

log = logging.getLogger("doclane.lease")


class LeaseStore(Protocol):
    def renew_lease(self, job_id: UUID, attempt: int, lease_s: float) -> bool: ...


def keep_lease(
    store: LeaseStore,
    job: Job,
    settings: ProcessingSettings,
    *,
    on_lost: Callable[[], None] | None = None,
) -> LeaseKeeper:
    """A claimed ``job``'s lease, kept from now on: renewed for ``DOCLANE_LEASE_S`` more every
    ``DOCLANE_CANCEL_CHECK_S`` (a third of the lease at most), until stopped or lost."""
    keeper = LeaseKeeper(
        store,
        job.id,
        job.attempt,
        settings.lease_s,
        interval_s=settings.lease_check_interval_s,
        on_lost=on_lost,
    )
    return keeper.start()


class LeaseKeeper:
    """Renews ``(job_id, attempt)``'s lease in the background until stopped or lost."""

    def __init__(
        self,
        store: LeaseStore,
        job_id: UUID,
        attempt: int,
        lease_s: float,
        *,
        interval_s: float | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._job_id = job_id
        self._attempt = attempt
        self._lease_s = lease_s
        self._interval_s = interval_s if interval_s is not None else lease_s / 3.0
        self._on_lost = on_lost
        self._stopped = threading.Event()
        self._lost = threading.Event()
        self._context = copy_context()  # log lines of renewals carry the job's context
        self._entry: TimerEntry | None = None

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def start(self) -> LeaseKeeper:
        self._entry = process_timers().schedule(time.monotonic() + self._interval_s, self._renew)
        return self

    def stop(self) -> None:
        """No renewal starts after this returns (one already running may finish)."""
        self._stopped.set()
        process_timers().cancel(self._entry)

    def job_lost(self) -> None:
        """Another write of this attempt found the job no longer its own: stop as a failed
        renewal would (``on_lost`` once, no more renewals)."""
        if self._stopped.is_set() or self._lost.is_set():
            return
        log.info("the job is no longer this attempt's (cancelled or requeued)")
        self._lost.set()
        process_timers().cancel(self._entry)
        self._call_on_lost()

    def _renew(self) -> float | None:
        """One renewal, on the renewer's thread: when to come back, or None to stop."""
        if self._stopped.is_set():
            return None
        return self._context.run(self._renew_in_context)

    def _renew_in_context(self) -> float | None:
        try:
            still_ours = self._store.renew_lease(self._job_id, self._attempt, self._lease_s)
        except PipelineError as exc:  # E401: try again next tick; the lease may lapse
            log.warning("could not renew the lease: %s", exc)
            return time.monotonic() + self._interval_s
        if still_ours:
            return time.monotonic() + self._interval_s
        if self._stopped.is_set() or self._lost.is_set():  # finished meanwhile, or known lost
            return None
        log.info("the job is no longer this attempt's (cancelled or requeued)")
        self._lost.set()
        self._call_on_lost()
        return None

    def _call_on_lost(self) -> None:
        if self._on_lost is not None:
            try:
                self._on_lost()
            except Exception:
                log.exception("stopping the lost attempt failed")
