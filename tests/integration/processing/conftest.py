"""In-process job processing against the fake server and a real database (no Celery)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.processing.processor import JobProcessor
from pipeline.queues import RecordingPublisher
from pipeline.resilience.facade import build_resilient
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from tests.fixtures.fake_server import FakeServer
from tests.support.processing import Bench, HookedRunner


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
