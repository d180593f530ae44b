"""The reconciler against a real database, with a publisher that records: expired leases,
stale and lost messages republished, scratch folders swept (the jobs made by ``enqueue``)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from errors import DatabaseUnavailable
from pipeline.jobs import EventKind, JobState, SubmissionRequest
from pipeline.queues import RecordingPublisher, jobs_per_message
from pipeline.reconciler import reconcile_once
from pipeline.settings import read_settings
from pipeline.store import JobStore
from pipeline.submission import enqueue
from tests.fixtures.samples import write_mixed, write_sample
from tests.fixtures.waiting import wait_for


def test_an_expired_lease_is_requeued_and_published_again(store: JobStore, tmp_path: Path) -> None:
    path = write_sample(tmp_path / "docs", "csv", 4)
    job_id = enqueue(
        SubmissionRequest([str(path)]), publisher=RecordingPublisher(), store=store
    ).job_ids[0]
    assert store.attempts.claim(job_id, "dead-worker", lease_s=0.05) is not None
    publisher = RecordingPublisher()
    settings = read_settings(reconcile=dict(reconcile_stale_after_s=3600)).reconcile

    report = wait_for(
        lambda: (r := reconcile_once(store, publisher, settings)).requeued and r,
        timeout=10,
        message="the lease to expire",
    )

    assert report.requeued == [job_id] and report.republished == [job_id]
    job = store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempt == 1


def test_stale_rows_are_not_republished_again_before_another_threshold(
    store: JobStore, tmp_path: Path
) -> None:
    path = write_sample(tmp_path / "docs", "md", 5)
    job_id = enqueue(
        SubmissionRequest([str(path)]), publisher=RecordingPublisher(), store=store
    ).job_ids[0]
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
    ids = enqueue(
        SubmissionRequest([str(p) for p in paths]), publisher=RecordingPublisher(), store=store
    ).job_ids
    publisher = RecordingPublisher(depths={"doclane.small": 2500})
    settings = read_settings(reconcile=dict(reconcile_stale_after_s=0.05)).reconcile

    def at_least_stale() -> bool:
        jobs = store.reads.get_jobs(ids)
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
    """More queued jobs than their queue's messages stand for: the difference was lost, and
    that many jobs get claim rights long before the stale threshold (the oldest: a queue hands
    its oldest messages out first). A message on the small queue stands for eight jobs. A queue
    with a batch of messages waiting is a backlog: left alone."""
    per = jobs_per_message("doclane.small")
    paths = [write_sample(tmp_path / "docs", "md", n) for n in range(2 * per + 4)]
    ids = enqueue(
        SubmissionRequest([str(p) for p in paths]), publisher=RecordingPublisher(), store=store
    ).job_ids
    settings = read_settings(
        reconcile=dict(
            reconcile_stale_after_s=3600, reconcile_lost_after_s=0.05, reconcile_batch=10
        )
    ).reconcile

    def past_threshold() -> bool:
        newest = max(j.updated_at for j in store.reads.get_jobs(ids))
        return (datetime.now(UTC) - newest).total_seconds() > 0.2

    wait_for(past_threshold, timeout=10, message="the rows to be past the threshold")
    publisher = RecordingPublisher(depths={"doclane.small": 3})
    assert reconcile_once(store, publisher, settings).lost == [], "every message is there"
    publisher.depths["doclane.small"] = 10  # a backlog (a batch or more waiting): not judged
    assert reconcile_once(store, publisher, settings).lost == []

    publisher.depths["doclane.small"] = 2  # one message lost: two stand for 2 x 8 of 20 jobs
    report = reconcile_once(store, publisher, settings)

    assert len(report.lost) == 4 and set(report.lost) <= set(ids)
    assert report.lost == report.republished
    assert [m.jobs for m in publisher.messages] == [tuple(report.lost)]  # one message for four
    notes = [
        e.detail
        for job_id in report.lost
        for e in store.reads.events(job_id)
        if e.kind is EventKind.NOTE
    ]
    assert len(notes) == 4 and all("presumed lost" in str(n) for n in notes)
    publisher.depths["doclane.small"] = 3  # the new message
    assert reconcile_once(store, publisher, settings).lost == [], "not taken again"


def test_a_retrying_job_overdue_is_republished_soon(store: JobStore, tmp_path: Path) -> None:
    """A retrying job's message waits out its countdown in a worker and runs once due: one
    overdue by the short threshold lost its message with its worker, whatever the queue holds
    (below a batch)."""
    path = write_sample(tmp_path / "docs", "md", 7)
    job_id = enqueue(
        SubmissionRequest([str(path)]), publisher=RecordingPublisher(), store=store
    ).job_ids[0]
    job = store.attempts.claim(job_id, "killed-worker", lease_s=30)
    assert job is not None
    error = DatabaseUnavailable("a retry's countdown, held by a worker killed since")
    assert store.attempts.schedule_retry(job_id, job.attempt, error, delay=0) is JobState.RETRYING
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
        enqueue(SubmissionRequest([str(write_sample(docs, "md", n))]),
                publisher=RecordingPublisher(), store=store).accepted[0].job_id
        for n in (1, 2)
    )  # fmt: skip
    claimed = store.attempts.claim(running, "w:1", 60)
    assert claimed is not None
    finished = store.attempts.claim(done, "w:2", 60)
    assert finished is not None and store.attempts.finish(done, finished.attempt, {"md": "# 2"})

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
