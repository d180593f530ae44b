"""The trail an attempt leaves, now that its writes share round trips.

An MCP call is written with the attempt's next write (a stage, or the results' transaction)
rather than on its own: whatever ends the attempt, every call must still be in the trail, in the
order made, and before the change of state that the attempt ended with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.jobs.model import EventKind, JobState, Stage
from pipeline.processing.outcomes import OutcomeKind
from tests.fixtures.samples import write_sample
from tests.support.processing import Bench

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"
CHECK = "check_document_in_local_cache"


def trail(bench: Bench, job_id: Any) -> list[tuple[str, ...]]:
    """Each event as a short tuple: ("state", to), ("call", tool, outcome), ("note",)."""
    shown: list[tuple[str, ...]] = []
    for event in bench.store.reads.events(job_id):
        if event.kind is EventKind.STATE_CHANGE:
            shown.append(("state", str(event.to_state)))
        elif event.kind is EventKind.MCP_CALL:
            shown.append(("call", event.tool or "", event.outcome or ""))
        else:
            shown.append(("note",))
    return shown


def test_a_finished_job_s_trail_holds_its_calls_then_the_note_then_the_success(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "md", 1))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert trail(bench, job_id) == [
        ("state", "queued"),
        ("state", "running"),
        ("call", CONVERT, "ok"),
        ("call", EXPORT, "ok"),
        ("note",),
        ("state", "succeeded"),
    ]


def test_the_claim_records_the_validating_stage(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "md", 2))

    claimed = bench.store.attempts.claim(job_id, "worker-x", lease_s=30)

    assert claimed is not None and claimed.stage is Stage.VALIDATING


def test_a_failed_conversion_s_call_comes_before_the_failure(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    bench.server.configure(fail_next=1, fail_with="is_error", fail_tools=[CONVERT])
    job_id = bench.submit_one(write_sample(bench.folder, "html", 3))

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.FAILED, "E306")
    assert trail(bench, job_id) == [
        ("state", "queued"),
        ("state", "running"),
        ("call", CONVERT, "error"),
        ("state", "failed"),
    ]


def test_calls_retried_within_an_attempt_are_all_kept_in_order(
    make_bench: Callable[..., Bench],
) -> None:
    """A try that converted and then failed leaves the document in the server's cache: the
    retry exports it rather than convert again, and the note counts one conversion."""
    bench = make_bench(resilience={"retry_max_tries": 3, "breaker_fail_max": 100})
    bench.server.configure(fail_next=1, fail_with="http503", fail_tools=[EXPORT])
    job_id = bench.submit_one(write_sample(bench.folder, "csv", 4))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    calls = [e for e in trail(bench, job_id) if e[0] == "call"]
    assert calls == [
        ("call", CONVERT, "ok"),
        ("call", EXPORT, "error"),
        ("call", EXPORT, "ok"),
    ]
    assert trail(bench, job_id)[-1] == ("state", "succeeded")
    [note] = notes(bench, job_id)
    assert note["conversions"] == 1
    assert any("an earlier try converted" in text for text in note["notes"]), note["notes"]


def test_a_retry_that_finds_the_kept_document_gone_converts_again_and_says_so(
    make_bench: Callable[..., Bench],
) -> None:
    """The server lost the document between the tries (evicted, or restarted): the retry
    converts again, and the note counts both conversions and says why."""
    bench = make_bench(resilience={"retry_max_tries": 3, "breaker_fail_max": 100})
    bench.runner.wrap_client = evicting_after_a_failed_export(bench)
    bench.server.configure(fail_next=1, fail_with="http503", fail_tools=[EXPORT])
    job_id = bench.submit_one(write_sample(bench.folder, "csv", 6))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    calls = [e[1:] for e in trail(bench, job_id) if e[0] == "call"]
    assert calls == [
        (CONVERT, "ok"),
        (EXPORT, "error"),
        (EXPORT, "error"),
        (CHECK, "ok"),
        (CONVERT, "ok"),
        (EXPORT, "ok"),
    ]
    [note] = notes(bench, job_id)
    assert note["conversions"] == 2, "the lost try's conversion is counted"
    assert any("earlier conversion" in text for text in note["notes"]), note["notes"]


def notes(bench: Bench, job_id: Any) -> list[dict[str, Any]]:
    return [e.detail or {} for e in bench.store.reads.events(job_id) if e.kind is EventKind.NOTE]


def evicting_after_a_failed_export(bench: Bench) -> Callable[[Any], Any]:
    """A client wrapper that empties the server's document cache when an export fails, as a
    server restarted between two tries would have."""

    class Evicting:
        def __init__(self, client: Any) -> None:
            self._client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self._client, name)

        def call_tool(self, name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
            try:
                return self._client.call_tool(name, arguments, **kwargs)
            except Exception:
                if name == EXPORT:
                    bench.server.evict()
                raise

    return Evicting


def test_an_attempt_that_lost_its_job_keeps_its_calls_and_writes_no_result(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "md", 5))
    bench.runner.after_unit = lambda: bench.store.operations.cancel(job_id) and None

    outcome = bench.take(job_id)

    assert outcome.kind is OutcomeKind.LOST
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert bench.store.reads.list_results(job_id) == []
    shown = trail(bench, job_id)
    assert [e for e in shown if e[0] == "call"] == [
        ("call", CONVERT, "ok"),
        ("call", EXPORT, "ok"),
    ]
    assert ("state", "succeeded") not in shown
