"""The store's pool survives PostgreSQL going away and coming back.

This stops the machine's PostgreSQL cluster for a moment, which disturbs every other test using
it at that time: the ``restarts_postgres`` marker lets a runner schedule it alone
(``pytest -m restarts_postgres``, or ``-m "not restarts_postgres"`` beside others).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from errors import DatabaseUnavailable
from pipeline.jobs.model import Job, JobState
from pipeline.store.connection import create_pool
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.fixtures.waiting import wait_for
from tests.support.postgres import pg_ctlcluster

pytestmark = pytest.mark.restarts_postgres


@pytest.fixture(autouse=True)
def _needs_the_machines_cluster() -> None:
    if shutil.which("pg_ctlcluster") is None or not os.path.isdir("/etc/postgresql"):
        pytest.fail("needs the machine's own PostgreSQL cluster (pg_ctlcluster)")


@pytest.fixture
def restartable_store(store_settings: StoreSettings) -> Iterator[JobStore]:
    settings = store_settings.model_copy(update={"pool_timeout_s": 1.0, "pool_min_size": 2})
    store = JobStore(settings)
    yield store
    store.close()


def test_calls_fail_with_e401_while_down_and_work_again_on_the_same_pool(
    restartable_store: JobStore, job_factory: Callable[..., Job]
) -> None:
    store = restartable_store
    job = job_factory(JobState.QUEUED)
    assert store.reads.get_job(job.id) is not None  # the pool holds live connections now

    pg_ctlcluster("stop")
    try:
        with pytest.raises(DatabaseUnavailable) as down:
            store.attempts.claim(job.id, "worker-a", lease_s=60)
        assert down.value.code == "E401" and down.value.retryable
        with pytest.raises(DatabaseUnavailable):
            store.reads.get_job(job.id)
    finally:
        pg_ctlcluster("start")

    def claim_once_up() -> Job | None:
        try:
            return store.attempts.claim(job.id, "worker-a", lease_s=60)
        except DatabaseUnavailable:
            return None

    claimed = wait_for(claim_once_up, timeout=60, message="a claim after the restart")
    assert claimed.state is JobState.RUNNING
    assert store.attempts.finish(job.id, claimed.attempt, {"md": "# after the restart"})


def test_after_a_restart_the_very_first_call_works_and_sweeps_the_dead_connections(
    store_settings: StoreSettings, caplog: pytest.LogCaptureFixture
) -> None:
    """Dead connections are checked on borrow and all swept at the first one, so no caller sees them
    and the first caller does not wait through psycopg_pool's backoff once per dead connection.

    The pool timeout is generous on purpose: the test is about *whether* the first call works, not
    how fast (a 1 s timeout here once failed on a loaded CI machine)."""
    settings = store_settings.model_copy(
        update={"pool_timeout_s": 60.0, "pool_min_size": 4, "pool_max_size": 4}
    )
    pool = create_pool(settings)
    try:
        with ExitStack() as held:  # four connections in use at once: four idle ones afterwards
            conns = [held.enter_context(pool.connection()) for _ in range(4)]
            assert len({conn.info.backend_pid for conn in conns}) == 4
        pg_ctlcluster("restart")  # returns once the server accepts connections again

        with (
            caplog.at_level(logging.WARNING, logger="doclane.store.connection"),
            pool.connection() as conn,
        ):
            assert conn.execute("select 1").fetchone() == (1,)
        sweeps = [r.getMessage() for r in caplog.records if "swept the pool" in r.getMessage()]
        assert sweeps == [
            "a pooled PostgreSQL connection was dead (database restarted?); "
            "swept the pool: 3 more idle connection(s) dead, replacements started"
        ]
    finally:
        pool.close()


def test_the_store_answers_its_first_call_after_a_restart(
    store_settings: StoreSettings, job_factory: Callable[..., Job]
) -> None:
    store = JobStore(store_settings.model_copy(update={"pool_timeout_s": 60.0}))
    try:
        job = job_factory(JobState.QUEUED)
        assert store.reads.get_job(job.id) is not None
        pg_ctlcluster("restart")
        again = store.reads.get_job(job.id)
        assert again is not None and again.id == job.id
    finally:
        store.close()
