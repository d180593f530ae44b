"""Keeping a running job's lease alive, and noticing when the job is no longer ours.

A thread renews the lease every third of its length. Renewal is a guarded write: when it
matches no row, the job was cancelled or requeued by the reconciler (this worker looked dead),
and the processor stops at its next step instead of doing work nobody will keep.
"""

from __future__ import annotations

import logging
import threading
from contextvars import copy_context
from typing import Protocol
from uuid import UUID

from errors import PipelineError

log = logging.getLogger("doclane.lease")


class LeaseStore(Protocol):
    def renew_lease(self, job_id: UUID, attempt: int, lease_s: float) -> bool: ...


class LeaseKeeper:
    """Renews ``(job_id, attempt)``'s lease in the background until stopped or lost."""

    def __init__(self, store: LeaseStore, job_id: UUID, attempt: int, lease_s: float) -> None:
        self._store = store
        self._job_id = job_id
        self._attempt = attempt
        self._lease_s = lease_s
        self._stop = threading.Event()
        self._lost = threading.Event()
        context = copy_context()  # log lines from the thread carry the job's context
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name=f"lease-{job_id}", daemon=True
        )

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._lease_s)

    def _run(self) -> None:
        interval = self._lease_s / 3.0
        while not self._stop.wait(interval):
            try:
                still_ours = self._store.renew_lease(self._job_id, self._attempt, self._lease_s)
            except PipelineError as exc:  # E401: try again next tick; the lease may lapse
                log.warning("could not renew the lease: %s", exc)
                continue
            if not still_ours:
                log.info("the job is no longer this attempt's (cancelled or requeued)")
                self._lost.set()
                return
