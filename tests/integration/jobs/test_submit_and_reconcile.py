"""Submission and the reconciler against a real database, with a publisher that records."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from errors import DatabaseUnavailable
from pipeline.jobs import EventKind, JobState
from pipeline.jobs.publishing import BROKER_DOWN_AFTER
from pipeline.jobs.reconcile import reconcile_once
from pipeline.jobs.submit import CHUNK_FIRST, CHUNK_MAX, enqueue
from pipeline.queues import SMALL_BELOW_BYTES, JobMessage, RecordingPublisher
from pipeline.settings import read_settings
from pipeline.store import AdminStore, JobStore, StoreSettings
from tests.fixtures.samples import write_mixed, write_sample
from tests.fixtures.waiting import wait_for
from tests.support.long_pdf import write_long_pdf


class CheckingPublisher(RecordingPublisher):
    """Records only what a *separate* connection can already see: the rows are committed."""

    def __init__(self, other: JobStore, fail: set[int] | None = None) -> None:
        super().__init__()
        self.other = other
        self.fail = fail or set()
        self.calls = 0

    def publish(self, message: JobMessage) -> None:
        self.calls += 1
        job = self.other.get_job(message.job_id)
        assert job is not None and job.state is JobState.QUEUED, "published before commit"
        if self.calls in self.fail:
            raise ConnectionError("broker down")
        super().publish(message)


def test_rows_are_committed_before_publishing_and_rejections_do_not_stop_others(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    good = write_mixed(docs, 6)
    (docs / "empty.md").write_bytes(b"")
    (docs / "fake.docx").write_bytes(b"not a zip")
    outside = tmp_path / "elsewhere" / "a.md"
    outside.parent.mkdir()
    outside.write_text("# outside")
    publisher = CheckingPublisher(make_store())
    settings = read_settings(sources=dict(allowed_roots=(docs,))).sources

    submission = enqueue(
        [
            str(docs),
            str(docs / "missing.md"),
            str(outside),
            "http://127.0.0.1/x.md",
            "ftp://example.org/a.md",
        ],
        ("md", "json"),
        publisher=publisher,
        store=store,
        source_settings=settings,
    )

    assert len(submission.accepted) == len(good)
    assert all(a.published and a.queue == "doclane.small" for a in submission.accepted)
    refused = {r.source: r.code for r in submission.rejected}
    assert refused == {
        str(docs / "empty.md"): "E106",
        str(docs / "fake.docx"): "E102",
        str(docs / "missing.md"): "E101",
        str(outside): "E105",
        "http://127.0.0.1/x.md": "E104",
        "ftp://example.org/a.md": "E104",
    }
    assert [m.job_id for m in publisher.messages] == submission.job_ids
    job = store.get_job(submission.job_ids[0])
    assert job is not None and job.formats == ("json", "md") and job.content_sha256


def test_a_failed_publish_leaves_a_queued_row_that_the_reconciler_publishes(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    paths = write_mixed(tmp_path / "docs", 3)
    publisher = CheckingPublisher(make_store(), fail={2})
    submission = enqueue([str(p) for p in paths], publisher=publisher, store=store)
    lost = submission.accepted[1].job_id
    assert list(submission.publish_failures) == [lost]
    assert not submission.accepted[1].published

    later = RecordingPublisher()
    settings = read_settings(reconcile=dict(reconcile_stale_after_s=0.2)).reconcile
    report = wait_for(
        lambda: (r := reconcile_once(store, later, settings)).republished and r,
        timeout=10,
        message="the reconciler to republish",
    )

    assert lost in report.republished
    assert JobMessage(lost, "doclane.small") in later.messages


def test_dedup_returns_the_succeeded_job_and_no_dedup_makes_a_new_one(
    store: JobStore, tmp_path: Path
) -> None:
    path = write_sample(tmp_path / "docs", "md", 1)
    publisher = RecordingPublisher()
    first = enqueue([str(path)], publisher=publisher, store=store).job_ids[0]
    claimed = store.claim(first, "w", 30)
    assert claimed is not None
    assert store.finish(first, claimed.attempt, {"md": "# done"})

    again = enqueue([str(path)], publisher=publisher, store=store)
    forced = enqueue([str(path)], no_dedup=True, publisher=publisher, store=store)

    assert again.accepted[0].job_id == first and again.accepted[0].deduplicated
    assert forced.job_ids[0] != first
    assert [m.job_id for m in publisher.messages] == [first, forced.job_ids[0]]


def test_the_dedup_engine_setting_converts_again_what_another_engine_made(
    store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document converted by docling-mcp, submitted again once the fleet names docling-rs as
    its engine, is a new job; submitted again under docling's name, the same job."""
    path = write_sample(tmp_path / "docs", "md", 5)
    publisher = RecordingPublisher()
    first = enqueue([str(path)], publisher=publisher, store=store).job_ids[0]
    claimed = store.claim(first, "w", 30)
    assert claimed is not None
    engine = {"note": "converted", "engine": "docling"}
    assert store.finish(first, claimed.attempt, {"md": "# done"}, note=engine)

    monkeypatch.setenv("DOCLANE_DEDUP_ENGINE", "docling-rs")
    switched = enqueue([str(path)], publisher=publisher, store=store)
    monkeypatch.setenv("DOCLANE_DEDUP_ENGINE", "docling")
    same = enqueue([str(path)], publisher=publisher, store=store)

    assert not switched.accepted[0].deduplicated and switched.job_ids[0] != first
    assert same.accepted[0].deduplicated and same.job_ids[0] == first
    assert [m.job_id for m in publisher.messages] == [first, switched.job_ids[0]]


def test_queues_follow_the_size_tier(store: JobStore, tmp_path: Path) -> None:
    big = tmp_path / "docs" / "big.md"
    big.parent.mkdir()
    with big.open("wb") as out:
        out.write(b"# big\n")
        out.write(b"x" * (SMALL_BELOW_BYTES + 1))
    small = write_sample(tmp_path / "docs", "md", 2)

    submission = enqueue([str(small), str(big)], publisher=RecordingPublisher(), store=store)

    assert [a.queue for a in submission.accepted] == ["doclane.small", "doclane.medium"]


def test_unknown_formats_are_refused_before_anything_is_written(
    store: JobStore, tmp_path: Path
) -> None:
    path = write_sample(tmp_path / "docs", "md", 3)
    with pytest.raises(ValueError, match="pdf"):
        enqueue([str(path)], ("md", "pdf"), publisher=RecordingPublisher(), store=store)
    assert store.count_in_flight()[JobState.QUEUED] == 0


def test_an_expired_lease_is_requeued_and_published_again(store: JobStore, tmp_path: Path) -> None:
    path = write_sample(tmp_path / "docs", "csv", 4)
    job_id = enqueue([str(path)], publisher=RecordingPublisher(), store=store).job_ids[0]
    assert store.claim(job_id, "dead-worker", lease_s=0.05) is not None
    publisher = RecordingPublisher()
    settings = read_settings(reconcile=dict(reconcile_stale_after_s=3600)).reconcile

    report = wait_for(
        lambda: (r := reconcile_once(store, publisher, settings)).requeued and r,
        timeout=10,
        message="the lease to expire",
    )

    assert report.requeued == [job_id] and report.republished == [job_id]
    job = store.get_job(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempt == 1


def test_stale_rows_are_not_republished_again_before_another_threshold(
    store: JobStore, tmp_path: Path
) -> None:
    path = write_sample(tmp_path / "docs", "md", 5)
    job_id = enqueue([str(path)], publisher=RecordingPublisher(), store=store).job_ids[0]
    publisher = RecordingPublisher()
    quick = read_settings(reconcile=dict(reconcile_stale_after_s=0.1)).reconcile
    wait_for(
        lambda: reconcile_once(store, publisher, quick).republished,
        timeout=10,
        message="the first republish",
    )
    slow = read_settings(reconcile=dict(reconcile_stale_after_s=3600)).reconcile

    assert reconcile_once(store, publisher, slow).republished == []
    assert [m.job_id for m in publisher.messages] == [job_id]


def test_a_backlog_still_in_the_broker_is_not_republished_until_its_queue_drains(
    store: JobStore, tmp_path: Path
) -> None:
    """Old queued rows on a queue with messages waiting are a backlog, not lost messages:
    republishing them every threshold would grow the queue without end."""
    paths = write_mixed(tmp_path / "docs", 3)
    ids = enqueue([str(p) for p in paths], publisher=RecordingPublisher(), store=store).job_ids
    publisher = RecordingPublisher(depths={"doclane.small": 2500})
    settings = read_settings(reconcile=dict(reconcile_stale_after_s=0.05)).reconcile

    def at_least_stale() -> bool:
        jobs = store.get_jobs(ids)
        newest = max(j.updated_at for j in jobs)
        return (datetime.now(UTC) - newest).total_seconds() > 0.2

    wait_for(at_least_stale, timeout=10, message="the rows to be older than the threshold")
    busy = reconcile_once(store, publisher, settings)

    assert busy.republished == [] and busy.busy_queues == ["doclane.small"]
    publisher.depths["doclane.small"] = 0  # the queue drained: what is still queued was lost
    drained = reconcile_once(store, publisher, settings)
    assert sorted(drained.republished) == sorted(ids) and drained.busy_queues == []


def test_queued_jobs_beyond_the_messages_of_their_queue_are_republished_soon(
    store: JobStore, tmp_path: Path
) -> None:
    """More queued jobs than messages in their queue: the difference was lost, and that many
    jobs get a message long before the stale threshold (the oldest: a queue hands its oldest
    messages out first). A queue with a batch of messages waiting is a backlog: left alone."""
    paths = [write_sample(tmp_path / "docs", "md", n) for n in range(5)]
    ids = enqueue([str(p) for p in paths], publisher=RecordingPublisher(), store=store).job_ids
    settings = read_settings(
        reconcile=dict(
            reconcile_stale_after_s=3600, reconcile_lost_after_s=0.05, reconcile_batch=10
        )
    ).reconcile

    def past_threshold() -> bool:
        newest = max(j.updated_at for j in store.get_jobs(ids))
        return (datetime.now(UTC) - newest).total_seconds() > 0.2

    wait_for(past_threshold, timeout=10, message="the rows to be past the threshold")
    publisher = RecordingPublisher(depths={"doclane.small": 5})
    assert reconcile_once(store, publisher, settings).lost == [], "every message is there"
    publisher.depths["doclane.small"] = 10  # a backlog (a batch or more waiting): not judged
    assert reconcile_once(store, publisher, settings).lost == []

    publisher.depths["doclane.small"] = 3  # two messages lost
    report = reconcile_once(store, publisher, settings)

    assert len(report.lost) == 2 and set(report.lost) <= set(ids)
    assert [m.job_id for m in publisher.messages] == report.lost == report.republished
    notes = [
        e.detail for job_id in report.lost for e in store.events(job_id) if e.kind is EventKind.NOTE
    ]
    assert len(notes) == 2 and all("presumed lost" in str(n) for n in notes)
    publisher.depths["doclane.small"] = 5  # the two new messages
    assert reconcile_once(store, publisher, settings).lost == [], "not taken again"


def test_a_retrying_job_overdue_is_republished_soon(store: JobStore, tmp_path: Path) -> None:
    """A retrying job's message waits out its countdown in a worker and runs once due: one
    overdue by the short threshold lost its message with its worker, whatever the queue holds
    (below a batch)."""
    path = write_sample(tmp_path / "docs", "md", 7)
    job_id = enqueue([str(path)], publisher=RecordingPublisher(), store=store).job_ids[0]
    job = store.claim(job_id, "killed-worker", lease_s=30)
    assert job is not None
    error = DatabaseUnavailable("a retry's countdown, held by a worker killed since")
    assert store.schedule_retry(job_id, job.attempt, error, delay=0) is JobState.RETRYING
    settings = read_settings(
        reconcile=dict(reconcile_stale_after_s=3600, reconcile_lost_after_s=0.05)
    ).reconcile
    publisher = RecordingPublisher(depths={"doclane.small": 3})

    report = wait_for(
        lambda: (r := reconcile_once(store, publisher, settings)).lost and r,
        timeout=10,
        message="the retrying job past the threshold",
    )

    assert report.lost == [job_id] == report.republished


def test_publishing_stops_trying_once_the_broker_is_plainly_down(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    """A broker that refuses three messages in a row is down: the rest are not tried (each
    try costs seconds), their rows stay queued for the reconciler."""
    paths = write_mixed(tmp_path / "docs", 8)
    publisher = CheckingPublisher(make_store(), fail=set(range(1, 100)))

    submission = enqueue([str(p) for p in paths], publisher=publisher, store=store)

    assert publisher.calls == BROKER_DOWN_AFTER
    assert sorted(submission.publish_failures) == sorted(submission.job_ids)
    assert {j.state for j in store.get_jobs(submission.job_ids)} == {JobState.QUEUED}


def test_the_reconciler_sweeps_what_dead_attempts_left_in_the_inbox(
    store: JobStore, tmp_path: Path
) -> None:
    """A killed worker leaves ``inbox/job-<id>-<attempt>/`` (and a ``.part`` in it) behind.

    The folder of an attempt that still runs stays; the folders of a finished job, of an
    earlier attempt, and of an unknown job go; a young folder stays whatever its job is.
    """
    inbox = tmp_path / "inbox"
    docs = tmp_path / "docs"
    running, done = (
        enqueue([str(write_sample(docs, "md", n))], ("md",), publisher=RecordingPublisher(),
                store=store).accepted[0].job_id
        for n in (1, 2)
    )  # fmt: skip
    claimed = store.claim(running, "w:1", 60)
    assert claimed is not None
    finished = store.claim(done, "w:2", 60)
    assert finished is not None and store.finish(done, finished.attempt, {"md": "# 2"})

    def leftover(name: str, age_s: float) -> Path:
        folder = inbox / name
        folder.mkdir(parents=True)
        (folder / ".doclane-abc.part").write_bytes(b"half a download")
        old = datetime.now(UTC).timestamp() - age_s
        os.utime(folder, (old, old))
        return folder

    alive = leftover(f"job-{running}-{claimed.attempt}", 600)
    stale_attempt = leftover(f"job-{running}-{claimed.attempt + 5}", 600)
    of_finished = leftover(f"job-{done}-{finished.attempt}", 600)
    of_unknown = leftover("job-00000000-0000-4000-8000-000000000000-1", 600)
    young = leftover(f"job-{done}-7", 0)
    stray_part = inbox / ".doclane-stray.part"
    stray_part.write_bytes(b"x")
    old = datetime.now(UTC).timestamp() - 600
    os.utime(stray_part, (old, old))
    unrelated = inbox / "keep-me.md"
    unrelated.write_text("# not ours")

    report = reconcile_once(
        store,
        RecordingPublisher(),
        read_settings(reconcile=dict(reconcile_scratch_min_age_s=60)).reconcile,
        inbox_dir=inbox,
    )

    assert sorted(report.swept) == sorted([stale_attempt, of_finished, of_unknown, stray_part])
    assert alive.is_dir() and young.is_dir() and unrelated.is_file()
    assert not stale_attempt.exists() and not of_finished.exists() and not of_unknown.exists()
    assert not stray_part.exists()


@pytest.fixture
def admin_store(store_settings: StoreSettings) -> Iterator[AdminStore]:
    """Another connection's view of the rows: the admin's whole-table counts."""
    admin = AdminStore(store_settings)
    yield admin
    admin.close()


class CountingPublisher(RecordingPublisher):
    """Notes, at each message, how many of the submission's rows another connection sees."""

    def __init__(self, other: AdminStore) -> None:
        super().__init__()
        self.other = other
        self.rows_seen: list[int] = []

    def publish(self, message: JobMessage) -> None:
        self.rows_seen.append(self.other.count_by_state().get(JobState.QUEUED, 0))
        super().publish(message)


def test_jobs_are_made_and_published_a_chunk_at_a_time_in_order(
    store: JobStore, admin_store: AdminStore, tmp_path: Path
) -> None:
    """Workers start on the first 64 sources while the rest are still being hashed: each
    chunk's rows are committed, then published, then the next chunk is made."""
    docs = tmp_path / "docs"
    for n in range(300):
        (docs / f"{n // 100}").mkdir(parents=True, exist_ok=True)
        (docs / f"{n // 100}" / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    (docs / "1" / "doc-150-empty.md").write_bytes(b"")  # a refusal amid the chunks
    publisher = CountingPublisher(admin_store)

    submission = enqueue([str(docs)], publisher=publisher, store=store)

    assert CHUNK_FIRST == 64 and CHUNK_MAX >= 256
    # 64, then 128, then the last 108: the rows a publish sees grow by chunk, never by file
    assert publisher.rows_seen[0] == 64 and publisher.rows_seen[63] == 64
    assert publisher.rows_seen[64] == 192 and publisher.rows_seen[191] == 192
    assert set(publisher.rows_seen[192:]) == {300}
    names = [Path(a.uri).name for a in submission.accepted]
    assert names == sorted(names) and len(names) == 300
    assert [m.job_id for m in publisher.messages] == submission.job_ids
    assert [(r.code, Path(r.source).name) for r in submission.rejected] == [
        ("E106", "doc-150-empty.md")
    ]


def test_the_broker_found_down_is_not_tried_again_for_later_chunks(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(200):  # three chunks
        (docs / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    publisher = CheckingPublisher(make_store(), fail=set(range(1, 1000)))

    submission = enqueue([str(docs)], publisher=publisher, store=store)

    assert publisher.calls == BROKER_DOWN_AFTER
    assert sorted(submission.publish_failures) == sorted(submission.job_ids)
    assert not any(a.published for a in submission.accepted)


class FailingSecondChunk(JobStore):
    """The real store, whose database goes away after the first chunk is made."""

    def __init__(self, store: JobStore) -> None:
        super().__init__(store.settings)
        self.chunks = 0

    def create_many(self, specs: Any, **dedup: Any) -> Any:
        self.chunks += 1
        if self.chunks == 2:
            raise DatabaseUnavailable("creating jobs: the server closed the connection")
        return super().create_many(specs, **dedup)


def test_a_database_lost_halfway_says_how_many_jobs_were_made_before(
    store: JobStore, admin_store: AdminStore, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(100):
        (docs / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    failing = FailingSecondChunk(store)
    publisher = RecordingPublisher()

    with pytest.raises(DatabaseUnavailable) as caught:
        enqueue([str(docs)], publisher=publisher, store=failing)

    assert "64 job(s) of this submission were made before it" in caught.value.message
    assert caught.value.detail == {"jobs_made_before": 64}
    counts = admin_store.count_by_state()
    assert counts[JobState.QUEUED] == sum(counts.values()) == 64
    assert len(publisher.messages) == 64  # the first chunk is on its way to the workers
    failing.close()


def test_a_long_pdf_is_split_and_only_its_slices_are_published(
    store: JobStore, tmp_path: Path
) -> None:
    long_pdf = write_long_pdf(tmp_path / "report.pdf", pages=70)
    short_pdf = write_long_pdf(tmp_path / "short.pdf", pages=32)
    publisher = RecordingPublisher()
    settings = read_settings(submit=dict(slice_pages=32)).submit
    submission = enqueue(
        [str(long_pdf), str(short_pdf)], publisher=publisher, store=store, submit_settings=settings
    )
    parent_id, whole_id = submission.job_ids
    parent = store.get_job(parent_id)
    assert parent is not None and parent.state is JobState.WAITING and parent.slices_total == 3
    slices = sorted(
        (j for j in store.get_jobs(m.job_id for m in publisher.messages) if j.parent_id),
        key=lambda j: j.created_at,
    )
    assert sorted(j.options["pages"] for j in slices) == ["1-32", "33-64", "65-70"]
    assert [m.job_id for m in publisher.messages if m.job_id not in {j.id for j in slices}] == [
        whole_id
    ]
    assert all(item.published for item in submission.accepted)
    again = enqueue(
        [str(long_pdf)],
        publisher=publisher,
        store=store,
        submit_settings=settings,
        formats=("json",),
    )
    json_job = store.get_job(again.job_ids[0])
    assert json_job is not None and json_job.state is JobState.QUEUED  # json is never sliced
