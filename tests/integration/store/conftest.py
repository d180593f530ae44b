"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pipeline.jobs.model import Job, JobState
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.support.store_builders import job_in_state


@pytest.fixture
def job_factory(store: JobStore) -> Callable[..., Job]:
    """``job_factory(JobState.RUNNING, formats=("md", "json"))``: a job of the test's store."""

    def make(state: JobState = JobState.QUEUED, **overrides: Any) -> Job:
        return job_in_state(store, state, **overrides)

    return make


@pytest.fixture
def admin(store_settings: StoreSettings) -> Iterator[JobStore]:
    """The admin's store on the test's database."""
    store = JobStore(store_settings, explain_missing_schema=True)
    yield store
    store.close()
