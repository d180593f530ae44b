"""The reconciler against a real database, with a publisher that records: expired leases,
queues with claimable work rung, scratch folders swept (the jobs made by ``enqueue``)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from errors import ServerUnavailable
from pipeline.jobs.model import JobState
from pipeline.jobs.request import SubmissionRequest
from pipeline.queues import QUEUE_SMALL, WAKE_BELLS, RecordingPublisher
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from pipeline.submission.intake import enqueue
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for


def submitted(store: JobStore, folder: Path, count: int) -> list:
    sources = [str(write_sample(folder, "md", n)) for n in range(count)]
    return enqueue(SubmissionRequest(sources), publisher=RecordingPublisher(), store=store).job_ids


def test_an_expired_lease_is_requeued_and_its_queue_rung(store: JobStore, tmp_path: Path) -> None:
    [job_id] = submitted(store, tmp_path / "docs", 1)
    assert store.attempts.claim(job_id, "dead-worker", lease_s=0.05) is not None
    publisher = RecordingPublisher(depths={QUEUE_SMALL: 0})

    report = wait_for(
        lambda: (r := reconcile_once(store, publisher)).requeued and r,
        timeout=10,
        message="the lease to expire",
    )

    assert report.requeued == [job_id] and report.rung == {QUEUE_SMALL: 1}
    assert [m.queue for m in publisher.messages] == [QUEUE_SMALL]
    job = store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.attempt == 1


def test_a_flushed_broker_is_rung_again_at_the_next_pass_and_only_where_no_bell_waits(
    store: JobStore, tmp_path: Path
) -> None:
    """Twenty queued jobs, the broker's bells gone (flushed): one pass rings the queue, as
    often as is useful and no more; a queue whose bells still wait is left alone (a backlog
    being drained), and a pass over a queue with nothing claimable rings nothing."""
    ids = submitted(store, tmp_path / "docs", 20)
    publisher = RecordingPublisher(depths={QUEUE_SMALL: 3})
    assert reconcile_once(store, publisher).rung == {}, "bells wait: a drain is coming"
    publisher.depths[QUEUE_SMALL] = 0  # flushed

    report = reconcile_once(store, publisher)

    assert report.rung == {QUEUE_SMALL: WAKE_BELLS} and len(publisher.messages) == WAKE_BELLS
    for job_id in ids:
        assert store.attempts.claim(job_id, "w", lease_s=60) is not None
    assert reconcile_once(store, publisher).rung == {}, "nothing claimable: no bell"


def test_a_retry_is_rung_for_once_due_and_not_before(store: JobStore, tmp_path: Path) -> None:
    [job_id] = submitted(store, tmp_path / "docs", 1)
    job = store.attempts.claim(job_id, "w", lease_s=60)
    assert job is not None
    error = ServerUnavailable("HTTP 503")
    store.attempts.schedule_retry(job_id, job.attempt, error, delay=3600)
    publisher = RecordingPublisher(depths={QUEUE_SMALL: 0})
    assert reconcile_once(store, publisher).rung == {}, "not due"
    assert store.operations.make_due(job_id)
    assert reconcile_once(store, publisher).rung == {QUEUE_SMALL: 1}


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
