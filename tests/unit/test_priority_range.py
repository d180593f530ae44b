"""A job's priority range and its message levels, read from one place (``pipeline.queues``)."""

from __future__ import annotations

import pydantic
import pytest

from pipeline.jobs.model import NewJob, SourceKind
from pipeline.queues import JOB_PRIORITY_MAX, JOB_PRIORITY_MIN, PRIORITY_LEVELS, clamp_priority


def job(priority: int) -> NewJob:
    return NewJob(
        source_kind=SourceKind.FILE, source_uri="/in/a.md", queue="doclane.small", priority=priority
    )


def test_a_job_takes_every_priority_its_column_holds_and_nothing_beyond() -> None:
    assert job(JOB_PRIORITY_MIN).priority == JOB_PRIORITY_MIN
    assert job(JOB_PRIORITY_MAX).priority == JOB_PRIORITY_MAX
    for beyond in (JOB_PRIORITY_MIN - 1, JOB_PRIORITY_MAX + 1):
        with pytest.raises(pydantic.ValidationError):
            job(beyond)


def test_every_job_priority_lands_on_one_of_the_levels_in_order() -> None:
    priorities = [JOB_PRIORITY_MIN, -1, 0, 1, 5, 9, 10, JOB_PRIORITY_MAX]
    levels = [clamp_priority(p) for p in priorities]
    assert levels == [0, 0, 0, 1, 5, 9, 9, 9]
    assert all(level in PRIORITY_LEVELS for level in levels)
    assert sorted(levels) == levels
