"""The job processor against the fake Docling server and a real PostgreSQL (no Celery).

Each test runs single claims (``Bench.take``) or drains and reads the truth from the database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from errors import ServerUnavailable
from pipeline.jobs.model import EventKind, JobState
from pipeline.mcp.client import McpClient
from pipeline.processing.outcomes import OutcomeKind
from pipeline.queues import QUEUE_SMALL
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_sample
from tests.support.processing import Bench, retry_bells

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


def mcp_calls(bench: Bench, job_id: Any) -> list[tuple[str, str | None, str | None]]:
    return [
        (e.tool or "", e.outcome, e.error_code)
        for e in bench.store.reads.events(job_id)
        if e.kind is EventKind.MCP_CALL
    ]


def test_a_job_is_converted_stored_and_its_calls_recorded(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "md", 1))

    outcome = bench.take(job_id)

    assert outcome.kind is OutcomeKind.SUCCEEDED
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED and job.attempt == 1
    assert job.server_origin == bench.server.origin
    markdown = bench.store.reads.get_result(job_id, "md")
    assert markdown is not None and "# Notes 1" in markdown and "| n | 1 |" in markdown
    assert mcp_calls(bench, job_id) == [(CONVERT, "ok", None), (EXPORT, "ok", None)]
    notes = [e.detail for e in bench.store.reads.events(job_id) if e.kind is EventKind.NOTE]
    assert notes and notes[-1] is not None and notes[-1]["profile"] == "docling-mcp"


def test_the_server_is_given_its_own_path_of_a_shared_file(
    make_bench: Callable[..., Bench], tmp_path: Path
) -> None:
    """DOCLANE_PATH_MAP: the worker validates its path, the server converts its own view of it.

    Here the server's view is a different folder with different content, so the markdown says
    which path the server was given.
    """
    worker_view, server_view = tmp_path / "worker-volume", tmp_path / "server-volume"
    server_view.mkdir()
    (server_view / "shared.md").write_text("# Seen by the server\n\nvia the mapped path\n")
    bench = make_bench(sources={"path_map": f"{worker_view}:{server_view}"})
    worker_view.mkdir()
    (worker_view / "shared.md").write_text("# Seen by the worker\n\nits own path\n")
    job_id = bench.submit_one(worker_view / "shared.md")

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.source_uri == str(worker_view / "shared.md")
    assert "# Seen by the server" in (bench.store.reads.get_result(job_id, "md") or "")


def test_docling_json_comes_from_the_server_cache_folder(
    make_bench: Callable[..., Bench], fake_server: FakeServer
) -> None:
    bench = make_bench(profiles={"server_cache_dir": fake_server.cache_dir})
    job_id = bench.submit_one(write_sample(bench.folder, "html", 2), formats=("md", "json"))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    document = json.loads(bench.store.reads.get_result(job_id, "json") or "null")
    assert isinstance(document, dict) and document
    assert "Page 2" in (bench.store.reads.get_result(job_id, "md") or "")


def test_a_redelivered_finished_job_is_skipped_and_stores_nothing_more(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "csv", 3))
    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED
    calls_before = bench.server.stats()["requests_by_tool"]
    events_before = len(bench.store.reads.events(job_id))

    again = bench.take(job_id)

    assert again.kind is OutcomeKind.SKIPPED
    assert len(bench.store.reads.list_results(job_id)) == 1
    assert len(bench.store.reads.events(job_id)) == events_before
    assert bench.server.stats()["requests_by_tool"] == calls_before


class EvictAfterConvert:
    """The real client; the server's cache is emptied right after each of the first ``times``
    conversions (counted in ``evictions``, which may be shared by the clients of several
    tries), as when ten other conversions on the same server push the key out between the
    two calls."""

    def __init__(
        self,
        client: McpClient,
        server: FakeServer,
        times: int = 1,
        evictions: list[int] | None = None,
    ) -> None:
        self._client = client
        self._server = server
        self._times = times
        self.evictions = evictions if evictions is not None else []

    @property
    def evicted(self) -> int:
        return sum(self.evictions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def call_tool(self, name: str, arguments: Any = None, **kwargs: Any) -> Any:
        result = self._client.call_tool(name, arguments, **kwargs)
        if name == CONVERT and len(self.evictions) < self._times:
            self.evictions.append(self._server.evict())
        return result


def test_a_key_evicted_between_convert_and_export_is_converted_again(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    proxies: list[EvictAfterConvert] = []

    def wrap(client: McpClient) -> EvictAfterConvert:
        proxies.append(EvictAfterConvert(client, bench.server))
        return proxies[-1]

    bench.runner.wrap_client = wrap
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 4))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert proxies[0].evicted == 1
    assert mcp_calls(bench, job_id) == [
        (CONVERT, "ok", None),
        (EXPORT, "error", "E307"),
        ("check_document_in_local_cache", "ok", None),
        (CONVERT, "ok", None),
        (EXPORT, "ok", None),
    ]
    assert "sample-0004" in (bench.store.reads.get_result(job_id, "md") or "")
    notes = [e.detail for e in bench.store.reads.events(job_id) if e.kind is EventKind.NOTE]
    assert notes[-1] is not None and notes[-1]["conversions"] == 2


def test_a_key_evicted_twice_is_an_overloaded_server_and_the_next_try_converts_afresh(
    make_bench: Callable[..., Bench],
) -> None:
    """A cache too small for the fleet is the server's state, not the document's: the unit is
    retried (E302), and the job succeeds instead of failing with E307."""
    bench = make_bench(resilience={"retry_max_tries": 3, "breaker_fail_max": 100})
    evictions: list[int] = []
    bench.runner.wrap_client = lambda client: EvictAfterConvert(client, bench.server, 2, evictions)
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 7))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert evictions == [1, 1]
    calls = mcp_calls(bench, job_id)
    assert calls == [
        (CONVERT, "ok", None),
        (EXPORT, "error", "E307"),
        ("check_document_in_local_cache", "ok", None),
        (CONVERT, "ok", None),
        (EXPORT, "error", "E307"),
        ("check_document_in_local_cache", "ok", None),
        (CONVERT, "ok", None),
        (EXPORT, "ok", None),
    ]
    notes = [e.detail for e in bench.store.reads.events(job_id) if e.kind is EventKind.NOTE]
    assert notes[-1] is not None and notes[-1]["conversions"] == 3


def test_a_source_gone_bad_after_submission_fails_with_its_code_and_no_server_call(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    path = write_sample(bench.folder, "md", 5)
    job_id = bench.submit_one(path)
    path.write_bytes(b"")
    calls_before = sum(bench.server.stats()["requests_by_tool"].values())

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.FAILED, "E106")
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.FAILED and job.error_code == "E106"
    assert sum(bench.server.stats()["requests_by_tool"].values()) == calls_before
    assert bench.store.reads.list_results(job_id) == []


def test_a_failed_jobs_stage_is_the_step_it_failed_in(
    make_bench: Callable[..., Bench], http_source: Any
) -> None:
    """Not the last progress write, which the progress hold may never have made: a URL that
    cannot be fetched failed fetching, a file gone bad validating, a server's refusal to
    export exporting, results that cannot be stored storing."""
    bench = make_bench()

    def stage_of(job_id: Any) -> str | None:
        job = bench.store.reads.get_job(job_id)
        assert job is not None and job.state is JobState.FAILED, job
        return job.stage.value if job.stage else None

    # each submitted just before it is processed: a message's claim takes the waiting
    # small jobs along with its own
    http_source.fail("/gone.md", 404)
    fetched = bench.submit(http_source.url("/gone.md")).accepted[0].job_id
    assert bench.take(fetched).code == "E101"
    assert stage_of(fetched) == "fetching"

    gone = write_sample(bench.folder, "md", 11)
    validated = bench.submit_one(gone)
    gone.write_bytes(b"")
    assert bench.take(validated).code == "E106"
    assert stage_of(validated) == "validating"

    bench.server.configure(fail_next=1, fail_with="is_error", fail_tools=[EXPORT])
    exported = bench.submit_one(write_sample(bench.folder, "html", 12))
    assert bench.take(exported).code == "E307"
    assert stage_of(exported) == "exporting"

    def not_its_formats(conversion: Any) -> Any:  # a bug: the database refuses such results
        conversion.outputs = {"html": "<p>not md</p>"}
        return conversion

    bench.runner.alter_result = not_its_formats
    stored = bench.submit_one(write_sample(bench.folder, "csv", 13))
    assert bench.take(stored).kind is OutcomeKind.FAILED
    assert stage_of(stored) == "storing"


def test_a_conversion_failure_keeps_the_server_text_and_is_final(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    bench.server.configure(fail_next=1, fail_with="is_error", fail_tools=[CONVERT])
    job_id = bench.submit_one(write_sample(bench.folder, "html", 6))

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.FAILED, "E306")
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.FAILED
    assert job.error_code == "E306" and job.error_message
    assert CONVERT in job.error_message


def test_retryable_errors_retry_with_backoff_then_fail_with_the_last_code(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(resilience={"retry_max_tries": 2, "breaker_fail_max": 100})
    bench.server.configure(fail_next=-1, fail_with="http503")
    job_id = bench.submit_one(write_sample(bench.folder, "csv", 7))

    first = bench.take(job_id)
    assert first.kind is OutcomeKind.RETRY and first.code == "E302"
    assert first.countdown_s is not None and 0.1 <= first.countdown_s <= 0.2
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.RETRYING and job.next_attempt_at
    assert bench.store.operations.make_due(job_id)  # the countdown's message arriving on time
    second = bench.take(job_id)
    assert second.kind is OutcomeKind.RETRY
    assert second.countdown_s is not None and 0.2 <= second.countdown_s <= 0.4
    assert bench.store.operations.make_due(job_id)
    last = bench.take(job_id)

    assert (last.kind, last.code) == (OutcomeKind.FAILED, "E302")
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.FAILED and job.attempts_spent == 3


def test_an_open_circuit_retries_after_the_reset_without_charging_an_attempt(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(
        resilience={"retry_max_tries": 1, "breaker_fail_max": 1, "breaker_reset_s": 30}
    )
    bench.server.configure(fail_next=1, fail_with="http503")
    tripping = bench.submit_one(write_sample(bench.folder, "md", 8))
    assert bench.take(tripping).code == "E302"  # opens the circuit
    job_id = bench.submit_one(write_sample(bench.folder, "md", 9))
    calls_before = sum(bench.server.stats()["requests_by_tool"].values())

    outcome = bench.take(job_id)

    assert outcome.kind is OutcomeKind.RETRY and outcome.code == "E309"
    assert not outcome.attempt_spent
    # After the reset, never before it (read after the outcome: it only shrinks), spread by
    # at most a quarter of the wait. The shared (Redis) state keeps opened_at in whole
    # seconds, so the breaker may report up to 1 s more than the 30 s reset, never less.
    [breaker] = bench.runner.resilient.breakers()
    assert outcome.countdown_s is not None
    assert breaker["retry_after_s"] <= outcome.countdown_s <= (30 + 1) * 1.25
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.RETRYING
    assert (job.attempt, job.attempts_spent) == (1, 0)
    assert sum(bench.server.stats()["requests_by_tool"].values()) == calls_before


def test_with_every_circuit_open_a_drain_claims_nothing_and_rings_for_after_the_reset(
    make_bench: Callable[..., Bench],
) -> None:
    """Once the process knows every circuit is open, a drain claims no job (claiming would
    only fail it with E309): the queued job stays unclaimed and uncharged, and the queue is
    rung again for after the breaker's reset."""
    bench = make_bench(
        resilience={"retry_max_tries": 1, "breaker_fail_max": 1, "breaker_reset_s": 30}
    )
    bench.server.configure(fail_next=1, fail_with="http503")
    tripping = bench.submit_one(write_sample(bench.folder, "md", 13))
    assert bench.take(tripping).code == "E302"  # opens the circuit
    met = bench.submit_one(write_sample(bench.folder, "md", 14))
    assert bench.take(met).code == "E309"  # the process meets it open
    waiting = bench.submit_one(write_sample(bench.folder, "md", 15))
    bench.publisher.messages.clear()

    drained = bench.processor.drain(QUEUE_SMALL)

    assert (drained.jobs, drained.stopped) == (0, "circuits")
    job = bench.store.reads.get_job(waiting)
    assert job is not None and (job.state, job.attempt) == (JobState.QUEUED, 0), "unclaimed"
    [bell] = bench.publisher.messages
    assert bell.queue == QUEUE_SMALL and bell.countdown_s is not None and bell.countdown_s > 20


def test_a_retrying_job_is_claimed_once_due_and_not_before(
    make_bench: Callable[..., Bench],
) -> None:
    """A retry's time is its row's: a claim before it takes nothing (the backoff holds, nothing
    is charged) and the queue is rung for when it is due; once due, the claim stages it back
    into its lane and takes it."""
    bench = make_bench(
        resilience={"retry_max_tries": 1, "breaker_fail_max": 100},
        processing={"job_retry_base_s": 60, "job_retry_max_s": 60},
    )
    bench.server.configure(fail_next=1, fail_with="http503")
    job_id = bench.submit_one(write_sample(bench.folder, "md", 11))
    first = bench.take(job_id)
    assert (first.kind, first.code) == (OutcomeKind.RETRY, "E302")
    assert first.countdown_s is not None
    assert retry_bells(bench) == [round(first.countdown_s + 0.05, 3)]
    waiting = bench.store.reads.get_job(job_id)

    early = bench.processor.drain(QUEUE_SMALL)

    assert (early.jobs, early.stopped) == (0, "empty")
    assert bench.store.reads.get_job(job_id) == waiting, "nothing claimed, nothing charged"
    assert bench.store.operations.make_due(job_id)
    assert bench.processor.drain(QUEUE_SMALL).jobs == 1
    job = bench.store.reads.get_job(job_id)
    assert job is not None and (job.state, job.attempt) == (JobState.SUCCEEDED, 2)


def test_a_job_cancelled_while_running_is_never_written_as_succeeded(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "md", 10))
    bench.runner.after_unit = lambda: bench.store.operations.cancel(job_id) and None

    outcome = bench.take(job_id)

    assert outcome.kind is OutcomeKind.LOST
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert bench.store.reads.list_results(job_id) == []


def test_a_url_is_downloaded_by_the_worker_and_its_facts_recorded(
    make_bench: Callable[..., Bench], http_source: Any, tmp_path: Path
) -> None:
    bench = make_bench()
    body = b"# Fetched\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    http_source.serve("/notes.md", body, content_type="text/markdown")
    submission = bench.submit(http_source.url("/notes.md"))
    assert not submission.rejected, submission.rejected
    job_id = submission.accepted[0].job_id
    assert submission.accepted[0].queue == "doclane.large"  # size unknown until fetched

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.size_bytes == len(body) and job.content_sha256
    assert "# Fetched" in (bench.store.reads.get_result(job_id, "md") or "")
    assert not any((tmp_path / "inbox").glob("job-*")), "the download is removed afterwards"


def test_the_per_format_profile_against_a_per_format_server(
    make_bench: Callable[..., Bench], fake_server_factory: Callable[..., FakeServer]
) -> None:
    server = fake_server_factory(profile="per-format")
    bench = make_bench(server)
    job_id = bench.submit_one(
        write_sample(bench.folder, "docx", 11), formats=("md", "html", "json")
    )

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    tools = [call[0] for call in mcp_calls(bench, job_id)]
    assert tools == ["convert_docx", "export_html", "export_json", "export_markdown"]
    assert "sample-0011" in (bench.store.reads.get_result(job_id, "md") or "")
    assert "<h1" in (bench.store.reads.get_result(job_id, "html") or "")
    assert json.loads(bench.store.reads.get_result(job_id, "json") or "null")


def test_a_per_format_retry_exports_the_document_its_first_try_converted(
    make_bench: Callable[..., Bench], fake_server_factory: Callable[..., FakeServer]
) -> None:
    server = fake_server_factory(profile="per-format")
    bench = make_bench(server, resilience={"retry_max_tries": 3, "breaker_fail_max": 100})
    server.configure(fail_next=1, fail_with="http503", fail_tools=["export_markdown"])
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 12), formats=("md", "html"))

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert [call[:2] for call in mcp_calls(bench, job_id)] == [
        ("convert_docx", "ok"),
        ("export_html", "ok"),
        ("export_markdown", "error"),
        ("export_html", "ok"),
        ("export_markdown", "ok"),
    ]
    [note] = [e.detail or {} for e in bench.store.reads.events(job_id) if e.kind is EventKind.NOTE]
    assert note["conversions"] == 1
    assert "sample-0012" in (bench.store.reads.get_result(job_id, "md") or "")


def test_a_per_format_server_without_a_tool_for_the_type_fails_with_e305(
    make_bench: Callable[..., Bench], fake_server_factory: Callable[..., FakeServer]
) -> None:
    bench = make_bench(fake_server_factory(profile="per-format"))
    job_id = bench.submit_one(write_sample(bench.folder, "html", 12))

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.FAILED, "E305")


@pytest.mark.parametrize("formats", [("md", "json")])
def test_json_without_a_readable_cache_folder_is_e305(
    make_bench: Callable[..., Bench], formats: tuple[str, ...]
) -> None:
    bench = make_bench()
    job_id = bench.submit_one(write_sample(bench.folder, "md", 13), formats=formats)

    outcome = bench.take(job_id)

    assert (outcome.kind, outcome.code) == (OutcomeKind.FAILED, "E305")
    job = bench.store.reads.get_job(job_id)
    assert job is not None and "DOCLANE_SERVER_CACHE_DIR" in (job.error_message or "")


def test_url_mode_server_hands_the_url_to_a_server_that_fetches_it(
    make_bench: Callable[..., Bench],
    fake_server_factory: Callable[..., FakeServer],
    http_source: Any,
) -> None:
    bench = make_bench(fake_server_factory(profile="per-format"), sources={"url_mode": "server"})
    http_source.serve("/remote.md", b"# Remote\n\ntext\n", content_type="text/markdown")
    url = http_source.url("/remote.md")
    job_id = bench.submit_one(url)

    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED

    assert [c[0] for c in mcp_calls(bench, job_id)] == ["convert_url", "export_markdown"]
    assert "# Remote" in (bench.store.reads.get_result(job_id, "md") or "")
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.size_bytes is None, "the worker fetched nothing"


def lone_bench(make_bench: Callable[..., Bench], **processing: Any) -> Bench:
    """A job at a time (no batch, no round)."""
    return make_bench(
        batches=True,
        processing={"batch_max_docs": 1, "round_max_docs": 1, "round_max_s": 600, **processing},
    )


def test_a_drain_takes_every_job_of_its_queue_one_after_another(
    make_bench: Callable[..., Bench],
) -> None:
    """Ten small jobs, one bell needed: the drain claims and runs them in fair order until a
    claim finds nothing, and rings nothing more (no work is left)."""
    bench = lone_bench(make_bench)
    ids = bench.submit(*(write_sample(bench.folder, "md", n) for n in range(10))).job_ids
    assert {m.queue for m in bench.publisher.messages} == {QUEUE_SMALL}
    assert 1 <= len(bench.publisher.messages) <= 8, "a bell a job, up to the wake-up's bells"
    bench.publisher.messages.clear()

    drained = bench.processor.drain(QUEUE_SMALL)

    assert (drained.jobs, drained.stopped) == (10, "empty")
    assert {j.state for j in bench.store.reads.get_jobs(ids)} == {JobState.SUCCEEDED}
    assert bench.publisher.messages == []
    again = bench.processor.drain(QUEUE_SMALL)
    assert (again.jobs, again.stopped) == (0, "empty"), "a doubled bell costs one empty claim"


def test_a_drain_whose_time_is_up_rings_its_queue_again(
    make_bench: Callable[..., Bench],
) -> None:
    """``DOCLANE_ROUND_MAX_S`` 0: a drain takes one claim, then rings its queue again so the
    rest is taken by the next bell (other queues, priorities and a shutdown come between)."""
    bench = lone_bench(make_bench, round_max_s=0)
    ids = [bench.submit_one(write_sample(bench.folder, "md", n)) for n in range(3)]
    bench.publisher.messages.clear()

    drained = bench.processor.drain(QUEUE_SMALL)

    assert (drained.jobs, drained.stopped) == (1, "budget")
    states = [j.state for j in bench.store.reads.get_jobs(ids)]
    assert states == [JobState.SUCCEEDED, JobState.QUEUED, JobState.QUEUED]
    assert [(m.queue, m.countdown_s) for m in bench.publisher.messages] == [(QUEUE_SMALL, None)]


def test_a_drain_goes_on_past_a_job_that_must_be_tried_again(
    make_bench: Callable[..., Bench],
) -> None:
    """The third job's server trouble (E302, retryable) is its own retry, staged in its row and
    rung for its due time; the drain takes the others."""
    bench = make_bench(
        batches=True,
        processing={
            **{"batch_max_docs": 1, "round_max_docs": 1, "round_max_s": 600},
            **{"job_retry_base_s": 60, "job_retry_max_s": 60},  # not due within the drain
        },
        resilience={"retry_max_tries": 1, "breaker_fail_max": 100},
    )
    ids = [bench.submit_one(write_sample(bench.folder, "md", n)) for n in range(6)]
    bench.publisher.messages.clear()
    units: list[McpClient] = []

    def trouble_for_the_third(client: McpClient) -> McpClient:
        units.append(client)
        if len(units) == 3:
            raise ServerUnavailable("the server went away during this document")
        return client

    bench.runner.wrap_client = trouble_for_the_third

    assert bench.processor.drain(QUEUE_SMALL).jobs == 6

    jobs = bench.store.reads.get_jobs(ids)
    assert [j.state for j in jobs].count(JobState.SUCCEEDED) == 5
    [unlucky] = [j for j in jobs if j.state is JobState.RETRYING]
    assert unlucky.error_code == "E302" and len(retry_bells(bench)) == 1
