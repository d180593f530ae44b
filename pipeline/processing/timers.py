"""One thread per process that runs the running attempts' deferred work when it falls due.

Two kinds of work wait on a clock while a job runs: its lease renewal (every few seconds) and
its held progress report (a stage not yet written, see :mod:`.journal`). Nearly every job of a
fast server ends before either is due, so scheduling must cost next to nothing and cancelling
even less: starting a thread or a ``threading.Timer`` per job cost more than a job's whole
bookkeeping against an instant server. Here a job adds a heap entry and, at its end,
marks it cancelled; the thread is woken only when a new entry is due before everything it
already waits for, and cancelled entries are dropped when they come up (or swept once they are
most of the heap).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

#: An action runs on the timer thread; it returns when to run again (``time.monotonic()``
#: seconds) or ``None`` to end.
Action = Callable[[], float | None]

log = logging.getLogger("doclane.timers")

#: Below this many entries a heap full of cancelled ones is left for the thread to drop.
_SWEEP_AT = 256


class TimerEntry:
    """A scheduled action; :meth:`Timers.cancel` it when it is no longer wanted."""

    __slots__ = ("action", "cancelled", "queued")

    def __init__(self, action: Action) -> None:
        self.action = action
        self.cancelled = False
        self.queued = False  # in the heap (not running its action)


class Timers:
    """A heap of due times served by one daemon thread, started on first use."""

    def __init__(self, name: str = "attempt-timers") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, TimerEntry]] = []
        self._order = itertools.count()
        self._cancelled = 0
        self._thread: threading.Thread | None = None

    def schedule(self, at: float, action: Action) -> TimerEntry:
        """Run ``action`` on the timer thread at ``at`` (``time.monotonic()`` seconds)."""
        entry = TimerEntry(action)
        self._push(at, entry)
        return entry

    def cancel(self, entry: TimerEntry | None) -> None:
        """The action will not start after this returns (one already running may finish)."""
        if entry is None or entry.cancelled:
            return
        with self._cond:
            entry.cancelled = True
            if not entry.queued:
                return
            self._cancelled += 1
            if self._cancelled > _SWEEP_AT and self._cancelled * 2 > len(self._heap):
                kept = []
                for item in self._heap:
                    if item[2].cancelled:
                        item[2].queued = False
                    else:
                        kept.append(item)
                self._heap = kept
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _push(self, at: float, entry: TimerEntry) -> None:
        with self._cond:
            if entry.cancelled:  # cancelled while its action ran
                return
            wake = not self._heap or at < self._heap[0][0]
            entry.queued = True
            heapq.heappush(self._heap, (at, next(self._order), entry))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif wake:  # the thread sleeps until its earliest entry: this one comes first
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                entry = self._next_due()
            try:
                again = entry.action()  # outside the lock: an action is a database round trip
            except Exception:  # a bug in one action must not stop every other job's timers
                log.exception("a timer's action failed; it will not run again")
                continue
            if again is not None:
                self._push(again, entry)

    def _next_due(self) -> TimerEntry:
        """Wait (holding the condition) for the earliest live entry to fall due, and take it."""
        while True:
            if not self._heap:
                self._cond.wait()
                continue
            at, _, entry = self._heap[0]
            if entry.cancelled:
                heapq.heappop(self._heap)
                entry.queued = False
                self._cancelled -= 1
                continue
            wait = at - time.monotonic()
            if wait > 0:
                self._cond.wait(wait)
                continue
            heapq.heappop(self._heap)
            entry.queued = False
            return entry


class _Process:
    """This process's timers, made on first use."""

    lock = threading.Lock()
    timers: Timers | None = None

    @classmethod
    def forget(cls) -> None:
        """In a forked child: the parent's thread did not come along, nor may its lock."""
        cls.lock = threading.Lock()
        cls.timers = None


os.register_at_fork(after_in_child=_Process.forget)


def process_timers() -> Timers:
    """The timers of this process (one thread for every attempt it runs)."""
    with _Process.lock:
        if _Process.timers is None:
            _Process.timers = Timers()
        return _Process.timers
