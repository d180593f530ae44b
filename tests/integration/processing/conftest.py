"""In-process job processing against the fake server and a real database (no Celery)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import pytest

from pipeline.jobs import Formats, SubmissionRequest
from pipeline.mcp import McpClient
from pipeline.processing import JobProcessor, Outcome, OutcomeKind
from pipeline.queues import RecordingPublisher
from pipeline.resilience import Resilient, RetryRecord, build_resilient
from pipeline.settings import read_settings
from pipeline.store import ClaimFound, JobStore
from pipeline.submission import Submission, enqueue
from tests.fixtures.fake_server import FakeServer

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


@pytest.fixture
def make_bench(
    store: JobStore, fake_server: FakeServer, tmp_path: Path
) -> Iterator[Callable[..., Bench]]:
    benches: list[Bench] = []

    def build(
        server: FakeServer | None = None,
        *,
        processing: dict[str, Any] | None = None,
        resilience: dict[str, Any] | None = None,
        sources: dict[str, Any] | None = None,
        profiles: dict[str, Any] | None = None,
        job_store: JobStore | None = None,
        batches: bool = False,
        pool: list[FakeServer] | None = None,
    ) -> Bench:
        """``batches=True``: small file jobs go in batches (the processor gets the bench's
        publisher for its companions' messages, and reads the fake's cache folder).
        ``pool``: more servers beside ``server``, one pool of origins."""
        target = server or fake_server
        store_used = job_store or store
        origins = [s.url for s in (target, *(pool or []))]
        resilient = build_resilient(
            read_settings(mcp=dict(origin=",".join(origins))).mcp,
            read_settings(resilience=dict(**(resilience or {}))).resilience,
        )
        source_settings = read_settings(
            sources=dict(inbox_dir=tmp_path / "inbox", allow_private_urls=True, **(sources or {}))
        ).sources
        runner = HookedRunner(resilient)
        publisher = RecordingPublisher()
        if batches:
            profiles = {"server_cache_dir": target.cache_dir, **(profiles or {})}
        processor = JobProcessor(
            store=store_used.attempts,
            runner=runner,
            settings=read_settings(
                processing=dict(
                    **{
                        "worker_id": "test-worker",
                        "lease_s": 30,
                        "job_retry_base_s": 0.2,
                        "job_retry_max_s": 1,
                        **({} if batches else {"round_max_docs": 1}),
                        **(processing or {}),
                    }
                )
            ).processing,
            source_settings=source_settings,
            profile_settings=read_settings(profiles=dict(**(profiles or {}))).profiles,
            publisher=publisher,
        )
        bench = Bench(
            store=store_used,
            processor=processor,
            runner=runner,
            publisher=publisher,
            folder=tmp_path / "docs",
            server=target,
            source_settings=source_settings,
            closers=[processor.close, resilient.close],
        )
        benches.append(bench)
        return bench

    yield build
    for bench in benches:
        for close in bench.closers:
            close()
