"""The questions admins ask: counts by state, failures by code, recent jobs by queue/state/code."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from pipeline.jobs.model import Job, JobState
from pipeline.store.store import JobStore


def test_counts_by_state_include_every_state(
    job_factory: Callable[..., Job], store: JobStore, admin: JobStore
) -> None:
    for state, how_many in ((JobState.QUEUED, 3), (JobState.FAILED, 2), (JobState.RUNNING, 1)):
        for _ in range(how_many):
            job_factory(state)
    job_factory(JobState.WAITING)  # a document split in two: it waits, its two slices queue
    assert store.reads.count_in_flight() == {
        JobState.QUEUED: 5,
        JobState.WAITING: 1,
        JobState.RUNNING: 1,
        JobState.RETRYING: 0,
    }
    counts = admin.admin.count_by_state()
    assert counts == {
        JobState.QUEUED: 5,
        JobState.WAITING: 1,
        JobState.RUNNING: 1,
        JobState.RETRYING: 0,
        JobState.SUCCEEDED: 0,
        JobState.FAILED: 2,
        JobState.CANCELLED: 0,
    }


def test_outcomes_counted_in_a_time_window(
    job_factory: Callable[..., Job], admin: JobStore
) -> None:
    done = job_factory(JobState.SUCCEEDED)
    job_factory(JobState.CANCELLED)
    job_factory(JobState.QUEUED)
    assert done.finished_at is not None
    since = done.finished_at - timedelta(seconds=1)
    assert admin.admin.count_finished_since(since) == {
        JobState.SUCCEEDED: 1,
        JobState.FAILED: 0,
        JobState.CANCELLED: 1,
    }
    assert sum(admin.admin.count_finished_since(since + timedelta(hours=1)).values()) == 0


def test_failures_by_error_code_since_a_time(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    failed = [job_factory(JobState.FAILED) for _ in range(2)]  # E306 (conversion failed)
    job_factory(JobState.RETRYING)  # E302, but not failed
    since = min(j.finished_at for j in failed if j.finished_at) - timedelta(seconds=1)
    assert store.reads.failures_by_error_code(since) == {"E306": 2}
    assert store.reads.failures_by_error_code(since + timedelta(hours=1)) == {}


def test_recent_jobs_newest_first_with_one_filter(
    job_factory: Callable[..., Job], admin: JobStore
) -> None:
    small = [job_factory(JobState.QUEUED, queue="doclane.small") for _ in range(3)]
    large = job_factory(JobState.FAILED, queue="doclane.large")
    assert [j.id for j in admin.admin.recent_jobs(queue="doclane.small", limit=2)] == [
        small[2].id,
        small[1].id,
    ]
    assert [j.id for j in admin.admin.recent_jobs(state=JobState.FAILED)] == [large.id]
    assert [j.id for j in admin.admin.recent_jobs(error_code="E306")] == [large.id]
    assert [j.id for j in admin.admin.recent_jobs(limit=1)] == [large.id]
    with pytest.raises(ValueError, match="at most one"):
        admin.admin.recent_jobs(queue="doclane.small", state=JobState.QUEUED)
