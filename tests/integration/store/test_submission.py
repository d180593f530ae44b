"""Creating jobs: one, ten thousand at once, and dedup against succeeded jobs."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest

from pipeline.jobs.model import Job, JobState, SourceKind
from pipeline.store.store import JobStore
from tests.support.jobs import succeeded_job
from tests.support.store_builders import new_job, sha256_of

REPORT = sha256_of("the quarterly report")


def test_a_new_job_is_queued_with_what_was_asked(store: JobStore) -> None:
    spec = new_job(
        source_kind=SourceKind.URL,
        source_uri="https://example.org/a.pdf",
        formats=["JSON", "md", "json"],
        options={"ocr": False, "lang": ["en"]},
        priority=5,
        queue="doclane.large",
        size_bytes=None,
    )
    created = store.submissions.create(spec)
    assert not created.deduplicated
    job = store.reads.get_job(created.job_id)
    assert job is not None
    assert job.state is JobState.QUEUED and job.attempt == 0
    assert job.formats == ("json", "md")
    assert job.options == {"ocr": False, "lang": ["en"]}
    assert (job.source_kind, job.source_uri) == (SourceKind.URL, "https://example.org/a.pdf")
    assert (job.priority, job.queue, job.size_bytes, job.max_attempts) == (
        5,
        "doclane.large",
        None,
        3,
    )


def test_same_content_profile_options_and_formats_returns_the_succeeded_job(
    store: JobStore,
) -> None:
    done = succeeded_job(
        store, content_sha256=REPORT, formats=("md", "json"), options={"a": 1, "b": [1, 2]}
    )
    again = store.submissions.create(
        new_job(content_sha256=REPORT, formats="json,md", options={"b": [1, 2], "a": 1})
    )
    assert again.deduplicated and again.job_id == done.id


@pytest.mark.parametrize(
    "difference",
    [
        {"profile": "per-format"},
        {"options": {"a": 2, "b": [1, 2]}},
        {"formats": ("md",)},
        {"content_sha256": sha256_of("another document")},
        {"content_sha256": None},
    ],
)
def test_any_difference_makes_a_new_job(store: JobStore, difference: dict[str, object]) -> None:
    done = succeeded_job(
        store, content_sha256=REPORT, formats=("md", "json"), options={"a": 1, "b": [1, 2]}
    )
    wanted = {"content_sha256": REPORT, "formats": ("md", "json"), "options": {"a": 1, "b": [1, 2]}}
    created = store.submissions.create(new_job(**{**wanted, **difference}))
    assert not created.deduplicated and created.job_id != done.id


@pytest.mark.parametrize("state", [JobState.QUEUED, JobState.RUNNING, JobState.FAILED])
def test_only_succeeded_jobs_are_dedup_targets(
    job_factory: Callable[..., Job], store: JobStore, state: JobState
) -> None:
    other = job_factory(state, content_sha256=REPORT)
    created = store.submissions.create(new_job(content_sha256=REPORT))
    assert not created.deduplicated and created.job_id != other.id


def test_no_dedup_always_makes_a_new_job(store: JobStore) -> None:
    done = succeeded_job(store, content_sha256=REPORT)
    created = store.submissions.create(new_job(content_sha256=REPORT), dedup=False)
    assert not created.deduplicated and created.job_id != done.id


@pytest.mark.parametrize(
    ("dedup_engine", "reused"),
    [
        (None, True),
        ("docling-rs", True),
        ("docling-rs 2.52.7", True),
        ("docling", False),
        ("docling-rs 2.52", False),
        ("docling-rs 2.52.8", False),
    ],
)
def test_a_dedup_engine_reuses_only_the_results_that_engine_made(
    store: JobStore, dedup_engine: str | None, reused: bool
) -> None:
    done = succeeded_job(store, content_sha256=REPORT, engine="docling-rs 2.52.7")
    created = store.submissions.create(new_job(content_sha256=REPORT), dedup_engine=dedup_engine)
    assert created.deduplicated is reused
    assert (created.job_id == done.id) is reused


def test_a_dedup_engine_passes_over_a_newer_job_of_another_engine(store: JobStore) -> None:
    """After a switch back: the newest succeeded job is another engine's, an older one this
    engine's; results of unknown engine (stored before engines were recorded) are never its."""
    unknown = succeeded_job(store, content_sha256=REPORT)
    ours = succeeded_job(store, content_sha256=REPORT, engine="docling")
    newest = succeeded_job(store, content_sha256=REPORT, engine="docling-rs 2.52.7")

    assert store.submissions.create(new_job(content_sha256=REPORT)).job_id == newest.id
    again = store.submissions.create(new_job(content_sha256=REPORT), dedup_engine="docling")
    assert again.deduplicated and again.job_id == ours.id
    other = store.submissions.create(new_job(content_sha256=REPORT), dedup_engine="pdf-magic")
    assert not other.deduplicated and other.job_id not in (unknown.id, ours.id, newest.id)


def test_ten_thousand_jobs_in_one_call(store: JobStore, raw_sql: psycopg.Connection) -> None:
    """The bulk path, with dedup on: jobs 0, 3000, 6000 and 9000 match succeeded jobs."""
    done = [succeeded_job(store, content_sha256=sha256_of(f"doc {i}")) for i in range(3)]
    specs = [
        new_job(content_sha256=sha256_of(f"doc {i // 3000 % 3}" if i % 3000 == 0 else str(i)))
        for i in range(10_000)
    ]
    started = time.perf_counter()
    created = store.submissions.create_many(specs)
    elapsed = time.perf_counter() - started
    print(f"\ncreate_many: 10,000 jobs in {elapsed:.3f}s")

    assert len(created) == 10_000
    deduplicated = [c for c in created if c.deduplicated]
    assert {c.job_id for c in deduplicated} == {d.id for d in done}
    assert [created[i].job_id for i in (0, 3000, 6000, 9000)] == [d.id for d in done] + [done[0].id]
    new_ids = [c.job_id for c in created if not c.deduplicated]
    assert len(set(new_ids)) == len(new_ids) == 10_000 - 4
    count = raw_sql.execute("SELECT count(*) FROM jobs WHERE state = 'queued'").fetchone()
    assert count == (10_000 - 4,)
    events = raw_sql.execute("SELECT count(*) FROM job_events WHERE to_state = 'queued'")
    assert events.fetchone() == (10_000 - 4 + 3,)
    sample = store.reads.get_jobs(new_ids[:3])
    assert [j.source_uri for j in sample] == [
        s.source_uri for s, c in zip(specs, created, strict=True) if c.job_id in new_ids[:3]
    ]
