"""The event loop's timer keeps its live entries and loses its cancelled ones to the sweep."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from kombu.asynchronous import Hub
from kombu.asynchronous.timer import Entry, Timer

from workers.timer_sweep import TimerSweep, sweep_cancelled


def noop() -> None:
    """What a timer entry runs; never called here."""


def due_entries(timer: Timer, count: int) -> list[Entry]:
    """``count`` entries already due, oldest first (a time limit passed, a countdown ended)."""
    now = time.monotonic()
    return [timer.call_at(now - 10_000 + n, noop) for n in range(count)]


def fired(schedule: Any) -> list[Entry]:
    """The entries the timer's scheduler hands out until it has nothing due."""
    out = []
    for _, entry in schedule:
        if entry is None:
            return out
        out.append(entry)
    raise AssertionError("unreachable: the scheduler never ends")


def test_the_sweep_drops_cancelled_entries_and_keeps_the_live_ones_in_order() -> None:
    timer = Timer()
    entries = due_entries(timer, 2000)
    for entry in entries[1::2]:  # every task that ended before its soft limit
        entry.cancel()

    assert sweep_cancelled(timer) == 1000
    assert len(timer) == 1000
    assert fired(iter(timer)) == entries[0::2]
    assert sweep_cancelled(timer) == 0


def test_a_scheduler_already_running_sees_the_swept_heap_and_what_comes_after() -> None:
    timer = Timer()
    entries = due_entries(timer, 6)
    for entry in entries[1::2]:
        entry.cancel()
    schedule = iter(timer)
    assert next(schedule) == (None, entries[0])  # the scheduler holds the heap now

    sweep_cancelled(timer)
    later = timer.call_at(time.monotonic() - 1, noop)

    assert fired(schedule) == [entries[2], entries[4], later]


def test_the_worker_step_sweeps_the_hubs_timer_until_it_stops() -> None:
    hub = Hub(Timer())
    worker = SimpleNamespace(hub=hub)
    step = TimerSweep(worker)
    step.start(worker)
    for entry in due_entries(hub.timer, 500):
        entry.cancel()

    step.entry()  # the sweep's own turn on the event loop (it enters itself again)

    assert {event.entry for event in hub.timer._queue} == {step.entry}
    step.stop(worker)
    assert step.entry is None
    hub.close()
