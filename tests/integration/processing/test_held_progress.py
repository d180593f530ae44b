"""Held progress: a running attempt's stage is written once the attempt is old enough.

A job that converts within ``DOCLANE_PROGRESS_HOLD_S`` writes no stage: its server comes with its
results. A job still running when the hold ends shows its stage, written by the process's timer
thread, and that write stops the attempt when the job is no longer its own. A failure writes
the stage it failed in, beside its error.

Holds are chosen so that no outcome depends on timing: an hour where nothing may be written, a
blink where the call is held open by the fake (``hang``) until the test has looked. With a blink,
whether the stage is *held* must not depend on how long the claim and the handshake took (on a
loaded machine they outlast 50 ms, the stage is written at once and the timer never runs): the
journal's clock is stopped at the test's start (``stopped_hold_clock``), so every stage is held,
and the hold's end, due on the timer thread's real clock, comes at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pipeline.jobs.model import EventKind, JobState, Stage
from pipeline.processing import journal as journal_module
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.store.attempts import Attempts
from pipeline.store.store import JobStore
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.processing import Bench

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"
CHECK_CACHE = "check_document_in_local_cache"
AN_HOUR = 3600.0
A_BLINK = 0.05
#: Lease renewals far away: only the held write can notice a lost job within a test's wait.
NO_RENEWAL = {"lease_s": 3000, "cancel_check_s": 1000}


class _StoppedClock:
    """``time`` as the journal sees it: ``monotonic()`` stays where it was made."""

    def __init__(self) -> None:
        self.at = time.monotonic()

    def monotonic(self) -> float:
        return self.at


@pytest.fixture
def stopped_hold_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stage the journal is told of falls inside its hold; the held write is due at once."""
    monkeypatch.setattr(journal_module, "time", _StoppedClock())


class StageWrites(Attempts):
    """The real attempts' writes, counting the stage writes they are asked for;
    ``before_stage`` runs first. ``store`` is a store of their own, with them as its attempts."""

    def __init__(self, store: JobStore) -> None:
        self.store = JobStore(store.settings)
        super().__init__(self.store.pool)
        self.store.attempts = self
        self.stages: list[Stage] = []
        self.before_stage: Callable[[], None] | None = None

    def set_stage(self, job_id: Any, attempt: int, stage: Stage, **kwargs: Any) -> bool:
        self.stages.append(stage)
        if self.before_stage is not None:
            self.before_stage()
        return super().set_stage(job_id, attempt, stage, **kwargs)


def in_background(bench: Bench, job_id: Any) -> tuple[threading.Thread, list[Outcome]]:
    outcomes: list[Outcome] = []
    thread = threading.Thread(target=lambda: outcomes.append(bench.take(job_id)))
    thread.start()
    return thread, outcomes


def test_a_fast_job_writes_no_stage_and_records_its_server_with_its_results(
    make_bench: Callable[..., Bench], store: JobStore
) -> None:
    spy = StageWrites(store)
    bench = make_bench(job_store=spy.store, processing={"progress_hold_s": AN_HOUR})
    job_id = bench.submit_one(write_sample(bench.folder, "md", 1))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert spy.stages == []
    job = store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED
    assert job.server_origin == bench.server.origin and job.stage is None
    succeeded = [e for e in store.reads.events(job_id) if e.to_state is JobState.SUCCEEDED]
    assert [e.server_origin for e in succeeded] == [bench.server.origin]
    calls = [e.tool for e in store.reads.events(job_id) if e.kind is EventKind.MCP_CALL]
    assert calls == [CONVERT, EXPORT]
    spy.store.close()


def test_without_a_hold_every_stage_is_written_as_reported(
    make_bench: Callable[..., Bench], store: JobStore
) -> None:
    spy = StageWrites(store)
    bench = make_bench(job_store=spy.store, processing={"progress_hold_s": 0})
    job_id = bench.submit_one(write_sample(bench.folder, "md", 2))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert spy.stages == [Stage.CONVERTING, Stage.EXPORTING]
    spy.store.close()


@pytest.mark.usefixtures("stopped_hold_clock")
def test_a_job_still_running_when_the_hold_ends_shows_its_stage_and_server(
    make_bench: Callable[..., Bench], store: JobStore
) -> None:
    bench = make_bench(processing={"progress_hold_s": A_BLINK}, resilience={"retry_max_tries": 2})
    bench.server.configure(fail_next=1, fail_with="hang", fail_tools=[CONVERT])
    job_id = bench.submit_one(write_sample(bench.folder, "html", 3))
    thread, outcomes = in_background(bench, job_id)
    try:
        running = wait_for(
            lambda: (job := store.reads.get_job(job_id)) and job.stage is Stage.CONVERTING and job,
            message="the held stage written while the call hangs",
        )
        assert running.state is JobState.RUNNING
        assert running.server_origin == bench.server.origin
        # The held stage may be written before the call reaches the server: release the hang
        # only once the server holds it, or the call would hang until its own deadline.
        wait_for(lambda: bench.server.stats()["hanging_calls"] == 1, message="the call hangs")
    finally:
        bench.server.reset()  # the hanging call ends with an error; the retry converts
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert [o.kind for o in outcomes] == [OutcomeKind.SUCCEEDED]


@pytest.mark.usefixtures("stopped_hold_clock")
def test_the_held_write_stops_an_attempt_whose_job_was_cancelled(
    make_bench: Callable[..., Bench], store: JobStore
) -> None:
    spy = StageWrites(store)
    bench = make_bench(job_store=spy.store, processing={"progress_hold_s": A_BLINK, **NO_RENEWAL})
    bench.server.configure(delay_s=600, delay_tools=[CONVERT])
    job_id = bench.submit_one(write_sample(bench.folder, "md", 4))

    def cancel_once_converting() -> None:
        """Just before the held write: the call is at the server, and the job is cancelled."""
        assert threading.current_thread().name == "attempt-timers", "the stage was not held"
        wait_for(lambda: bench.server.stats()["tool_calls_in_flight"] == 1, message="converting")
        assert store.operations.cancel(job_id) is not None

    spy.before_stage = cancel_once_converting
    thread, outcomes = in_background(bench, job_id)
    thread.join(timeout=60)

    assert not thread.is_alive(), "the attempt did not stop"
    assert [o.kind for o in outcomes] == [OutcomeKind.LOST]
    assert spy.stages == [Stage.CONVERTING]
    [withdrawn] = wait_for(lambda: bench.server.stats()["cancelled"], message="cancelled sent")
    assert "withdrawn" in withdrawn["reason"]
    job = store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert store.reads.list_results(job_id) == []
    spy.store.close()


def test_a_failure_records_the_stage_it_failed_in_and_its_server(
    make_bench: Callable[..., Bench], store: JobStore
) -> None:
    bench = make_bench(processing={"progress_hold_s": AN_HOUR})
    bench.server.configure(fail_next=1, fail_with="is_error", fail_tools=[EXPORT])
    job_id = bench.submit_one(write_sample(bench.folder, "csv", 5))

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.FAILED, "E307")
    job = store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.FAILED
    assert (job.stage, job.server_origin) == (Stage.EXPORTING, bench.server.origin)
    trail = [
        (e.kind, e.tool or e.to_state)
        for e in store.reads.events(job_id)
        if e.kind is not EventKind.NOTE
    ]
    assert trail[-4:] == [
        (EventKind.MCP_CALL, CONVERT),
        (EventKind.MCP_CALL, EXPORT),
        (EventKind.MCP_CALL, CHECK_CACHE),  # still cached: the export itself failed
        (EventKind.STATE_CHANGE, JobState.FAILED),
    ]
