"""``finished_among``: what ``doclane submit --wait`` polls instead of reading every job."""

from __future__ import annotations

from collections.abc import Callable
from uuid import uuid4

from pipeline.jobs.model import Job, JobState
from pipeline.store.store import JobStore


def test_only_finished_jobs_come_back_with_their_state(
    store: JobStore, job_factory: Callable[..., Job]
) -> None:
    jobs = {state: job_factory(state) for state in JobState}
    asked = [job.id for job in jobs.values()] + [uuid4()]  # an unknown id is simply not there

    finished = store.reads.finished_among(asked)

    assert finished == {jobs[s].id: s for s in JobState if s.terminal}
