"""Keeping a running job's lease alive, and noticing when the job is no longer ours.

Every few seconds (``DOCLANE_CANCEL_CHECK_S``, at most a third of the lease) the lease is
renewed. Renewal is a guarded write: when it matches no row, the job was cancelled or requeued
by the reconciler (this worker looked dead). The keeper then calls ``on_lost`` (the processor
cancels the attempt's MCP call with it) and the processor stops at its next step instead of
doing work nobody will keep.

The renewals of all of a process's attempts run on one long-lived thread (:class:`_Renewer`),
not on a thread per attempt: starting and joining a thread for every job cost more than the job's
whole bookkeeping against a fast server, and nearly all jobs end before their first renewal.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
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
        self._stopped = threading.Event()
        self._lost = threading.Event()
        self._context = copy_context()  # log lines of renewals carry the job's context

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def start(self) -> LeaseKeeper:
        _renewer().schedule(self, time.monotonic() + self._interval_s)
        return self

    def stop(self) -> None:
        """No renewal starts after this returns (one already running may finish)."""
        self._stopped.set()
        _renewer().forget(self)

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
        if self._stopped.is_set():  # the attempt finished meanwhile: nothing was lost
            return None
        log.info("the job is no longer this attempt's (cancelled or requeued)")
        self._lost.set()
        if self._on_lost is not None:
            try:
                self._on_lost()
            except Exception:
                log.exception("stopping the lost attempt failed")
        return None


class _Renewer:
    """One daemon thread that runs every keeper's renewals of this process when they are due."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, LeaseKeeper]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, keeper: LeaseKeeper, at: float) -> None:
        with self._cond:
            heapq.heappush(self._due, (at, next(self._order), keeper))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)
                self._thread.start()
            self._cond.notify()

    def forget(self, keeper: LeaseKeeper) -> None:
        with self._cond:
            kept = [entry for entry in self._due if entry[2] is not keeper]
            if len(kept) != len(self._due):
                self._due = kept
                heapq.heapify(self._due)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due or self._due[0][0] > time.monotonic():
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._cond.wait(timeout)
                _, _, keeper = heapq.heappop(self._due)
            again = keeper._renew()  # outside the lock: a renewal is a database round trip
            if again is not None:
                self.schedule(keeper, again)


class _Process:
    """This process's renewer, made on first use."""

    lock = threading.Lock()
    renewer: _Renewer | None = None

    @classmethod
    def forget(cls) -> None:
        """In a forked child: the parent's thread did not come along, nor may its lock."""
        cls.lock = threading.Lock()
        cls.renewer = None


os.register_at_fork(after_in_child=_Process.forget)


def _renewer() -> _Renewer:
    with _Process.lock:
        if _Process.renewer is None:
            _Process.renewer = _Renewer()
        return _Process.renewer
