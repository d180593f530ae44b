"""Sweeping the worker's event-loop timer of its cancelled entries.

Celery's prefork pool keeps a task's time limits in the worker's main process: when a pool
process accepts a task, the main process puts an entry for its soft limit on the event loop's
timer (kombu's heap), and when the task ends it marks that entry cancelled. Kombu drops a
cancelled entry only when its time comes, so every message the node took keeps its entry
(about half a kilobyte with its weak proxy, its heap tuple and its arguments) for the whole
soft limit, 693 s for a small job with the default timeouts. At the message rates of an instant
server, or of the send-backs through an outage, that is tens of thousands of dead entries and
tens of MB of the main process, grown with the messages over those eleven minutes and then
left to a heap the process keeps (the same report upstream: celery/celery#5200).

A sweep every ``SWEEP_EVERY_S`` rebuilds the heap from its live entries, so what the main
process holds is a sweep's interval of messages, not a soft limit's. It runs on the event loop
as a timer entry of its own (the event loop is the only thread that touches the heap) and
edits the list in place: the timer's scheduler holds that list, not the timer.
"""

from __future__ import annotations

import heapq
from typing import Any

from celery import bootsteps
from kombu.asynchronous.timer import Timer

#: Seconds between sweeps: at 100 messages a second, 1,000 dead entries (about 0.5 MB) at most.
SWEEP_EVERY_S = 10.0


def sweep_cancelled(timer: Timer) -> int:
    """Drop ``timer``'s cancelled entries, keeping the live ones in their order; returns how
    many went. A cancelled entry would only be popped and skipped when its time came."""
    queue: list[Any] = timer._queue
    live = [event for event in queue if not event.entry.canceled]
    dropped = len(queue) - len(live)
    if dropped:
        heapq.heapify(live)
        queue[:] = live
    return dropped


class TimerSweep(bootsteps.StartStopStep):
    """The worker blueprint's step that sweeps the event loop's timer (see the module)."""

    # The hub (and its timer) exists only with an event loop, as with the prefork pool on
    # Redis or RabbitMQ; without one the timer is a thread of Celery's, shared with others.
    requires = {"celery.worker.components:Hub"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.entry: Any = None

    def start(self, parent: Any) -> None:
        hub = getattr(parent, "hub", None)
        if hub is not None:
            self.entry = hub.call_repeatedly(SWEEP_EVERY_S, sweep_cancelled, hub.timer)

    def stop(self, parent: Any) -> None:
        if self.entry is not None:
            self.entry.cancel()
            self.entry = None

    shutdown = stop
