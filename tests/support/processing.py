"""The processing bench: a store, a runner and its hooks, and the checks its tests share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from pipeline.jobs.formats import Formats
from pipeline.jobs.model import EventKind, JobState
from pipeline.jobs.request import SubmissionRequest
from pipeline.mcp.client import McpClient
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.processor import JobProcessor
from pipeline.queues import RecordingPublisher
from pipeline.resilience.facade import Resilient
from pipeline.resilience.retry import RetryRecord
from pipeline.store.attempts import ClaimFound
from pipeline.store.store import JobStore
from pipeline.submission.intake import Submission, enqueue
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_sample

T = TypeVar("T")


@dataclass
class HookedRunner:
    """The real resilience layer, with a hook around each unit (to act between two calls)."""

    resilient: Resilient
    wrap_client: Callable[[McpClient], Any] | None = None
    after_unit: Callable[[], None] | None = None
    #: What the unit gave, changed before the processor sees it (a bug's results, say).
    alter_result: Callable[[Any], Any] | None = None

    def run(
        self,
        unit: Callable[[McpClient], T],
        *,
        label: str = "conversion",
        record: RetryRecord | None = None,
    ) -> T:
        def hooked(client: McpClient) -> T:
            if self.wrap_client is not None:
                client = self.wrap_client(client)
            result = unit(client)
            if self.after_unit is not None:
                self.after_unit()
            if self.alter_result is not None:
                result = self.alter_result(result)
            return result

        return self.resilient.run(hooked, label=label, record=record)

    def refusing_for(self) -> float:
        return self.resilient.refusing_for()

    def on_each_server(self, look: Callable[[McpClient], T]) -> list[T | None]:
        return self.resilient.on_each_server(look)


@dataclass
class Bench:
    """Everything one processor test needs: a store, a processor, a publisher, a folder."""

    store: JobStore
    processor: JobProcessor
    runner: HookedRunner
    publisher: RecordingPublisher
    folder: Path
    server: FakeServer
    source_settings: Any
    closers: list[Callable[[], None]] = field(default_factory=list)

    def submit(self, *sources: str | Path, formats: tuple[str, ...] = ("md",)) -> Submission:
        return enqueue(
            SubmissionRequest([str(s) for s in sources], Formats.parse(formats)),
            publisher=self.publisher,
            store=self.store,
            source_settings=self.source_settings,
        )

    def submit_one(self, source: str | Path, formats: tuple[str, ...] = ("md",)) -> UUID:
        submission = self.submit(source, formats=formats)
        assert not submission.rejected, submission.rejected
        return submission.accepted[0].job_id

    def take(self, job_id: UUID) -> Outcome:
        """One claim on ``job_id``'s queue, run: the lead's outcome (the fair order's next job,
        which is ``job_id`` where it waits alone); SKIPPED when the claim took nothing."""
        job = self.store.reads.get_job(job_id)
        assert job is not None
        claim = self.processor.claim(job.queue)
        if isinstance(claim, ClaimFound):
            return Outcome(OutcomeKind.SKIPPED, job_id)
        return self.processor.run(claim)


def retry_bells(bench: Bench) -> list[float]:
    """The bells rung for retries, by when (each with a countdown)."""
    return [m.countdown_s for m in bench.publisher.messages if m.countdown_s is not None]


def submit_samples(bench: Bench, count: int, formats: tuple[str, ...] = ("md",)) -> list[UUID]:
    """Submit ``count`` samples; the publisher then holds only what processing publishes."""
    kinds = ("md", "html", "csv")
    paths = [write_sample(bench.folder, kinds[n % 3], n) for n in range(1, count + 1)]
    submission = bench.submit(*paths, formats=formats)
    assert not submission.rejected
    bench.publisher.messages.clear()
    return [a.job_id for a in submission.accepted]


def assert_own_result(bench: Bench, job_id: UUID, number: int) -> None:
    markdown = bench.store.reads.get_result(job_id, "md") or ""
    kind = ("md", "html", "csv")[number % 3]
    marker = MARKERS[kind].format(n=number, people=700000 + number)
    assert marker in markdown, f"job {number} got someone else's result: {markdown[:80]!r}"


def assert_succeeded_once(bench: Bench, job_id: UUID, number: int) -> None:
    job = bench.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED, (job_id, job)
    assert (job.attempt, job.attempts_spent) == (1, 1)
    assert [(r.format, r.attempt) for r in bench.store.reads.list_results(job_id)] == [("md", 1)]
    assert_own_result(bench, job_id, number)
    events = bench.store.reads.events(job_id)
    calls = [(e.tool, e.outcome) for e in events if e.kind is EventKind.MCP_CALL]
    assert calls == [(CONVERT, "ok"), (EXPORT, "ok")], "its own calls, in its own trail"
    assert sum(1 for e in events if e.to_state is JobState.SUCCEEDED) == 1


MARKERS = {"md": "# Notes {n}", "html": "Page {n}", "csv": "{people}"}

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"
