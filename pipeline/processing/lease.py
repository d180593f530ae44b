"""Keeping a running job's lease alive, and noticing when the job is no longer ours.

A thread renews the lease every few seconds (``DOCLANE_CANCEL_CHECK_S``, at most a third of
the lease). Renewal is a guarded write: when it matches no row, the job was cancelled or
requeued by the reconciler (this worker looked dead). The keeper then calls ``on_lost`` (the
processor cancels the attempt's MCP call with it) and the processor stops at its next step
instead of doing work nobody will keep.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextvars import copy_context
from typing import Protocol
from uuid import UUID

from errors import PipelineError

log = logging.getLogger("doclane.lease")


class LeaseStore(Protocol):
    def renew_lease(self, job_id: UUID, attempt: int, lease_s: float) -> bool: ...


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
        while not self._stop.wait(self._interval_s):
            try:
                still_ours = self._store.renew_lease(self._job_id, self._attempt, self._lease_s)
            except PipelineError as exc:  # E401: try again next tick; the lease may lapse
                log.warning("could not renew the lease: %s", exc)
                continue
            if not still_ours:
                log.info("the job is no longer this attempt's (cancelled or requeued)")
                self._lost.set()
                if self._on_lost is not None:
                    try:
                        self._on_lost()
                    except Exception:
                        log.exception("stopping the lost attempt failed")
                return
