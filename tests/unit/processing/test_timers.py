"""The process's timer thread: actions run in due order, cancelled ones never, and one
failing action does not stop the others.

Each test makes its own ``Timers`` and waits on events with a deadline; due times are either
"now" or an hour away, so no outcome depends on how fast the machine is.
"""

from __future__ import annotations

import threading
import time

from pipeline.processing.timers import Action, Timers

DEADLINE_S = 30.0
AN_HOUR = 3600.0


def record(ran: list[str], name: str, done: threading.Event | None = None) -> Action:
    """An action that notes it ran (and sets ``done``), and does not come back."""

    def action() -> float | None:
        ran.append(name)
        if done is not None:
            done.set()
        return None

    return action


def test_due_actions_run_in_due_order_and_a_returned_time_runs_them_again() -> None:
    timers = Timers(name="test-timers")
    ran: list[str] = []
    done = threading.Event()
    now = time.monotonic()
    rounds = iter(range(3))

    def again() -> float | None:
        ran.append(f"again-{next(rounds)}")
        if len(ran) == 5:
            done.set()
            return None
        return time.monotonic()

    timers.schedule(now - 1, record(ran, "first"))
    timers.schedule(now - 0.5, record(ran, "second"))
    timers.schedule(now, again)

    assert done.wait(DEADLINE_S)
    assert ran == ["first", "second", "again-0", "again-1", "again-2"]


def test_a_cancelled_action_never_runs() -> None:
    timers = Timers(name="test-timers")
    ran: list[str] = []
    busy, release, done = threading.Event(), threading.Event(), threading.Event()

    def blocker() -> float | None:
        busy.set()
        release.wait(DEADLINE_S)
        return None

    timers.schedule(time.monotonic(), blocker)
    assert busy.wait(DEADLINE_S)  # the thread is inside an action: nothing else can start
    cancelled = timers.schedule(time.monotonic(), record(ran, "cancelled"))
    timers.cancel(cancelled)
    timers.schedule(time.monotonic(), record(ran, "after", done))
    release.set()

    assert done.wait(DEADLINE_S)
    assert ran == ["after"]


def test_an_entry_due_before_the_others_wakes_the_sleeping_thread() -> None:
    timers = Timers(name="test-timers")
    ran: list[str] = []
    done = threading.Event()
    later = timers.schedule(time.monotonic() + AN_HOUR, record(ran, "later"))
    # The thread sleeps until the hour is up; an entry due now must wake it.
    timers.schedule(time.monotonic(), record(ran, "now", done))

    assert done.wait(DEADLINE_S)
    assert ran == ["now"]
    timers.cancel(later)


def test_many_cancelled_entries_are_swept_and_live_ones_kept() -> None:
    timers = Timers(name="test-timers")
    done = threading.Event()
    far = [timers.schedule(time.monotonic() + AN_HOUR, lambda: None) for _ in range(1000)]
    keep = timers.schedule(time.monotonic() + AN_HOUR, lambda: None)
    for entry in far:
        timers.cancel(entry)

    assert len(timers._heap) < 300  # swept, not left for the thread to meet in an hour
    assert any(item[2] is keep for item in timers._heap)
    timers.schedule(time.monotonic(), record([], "now", done))
    assert done.wait(DEADLINE_S)


def test_an_action_that_raises_does_not_stop_the_others() -> None:
    timers = Timers(name="test-timers")
    done = threading.Event()

    def broken() -> float | None:
        raise RuntimeError("a bug in one job's timer")

    timers.schedule(time.monotonic() - 1, broken)
    timers.schedule(time.monotonic(), record([], "after", done))

    assert done.wait(DEADLINE_S)
