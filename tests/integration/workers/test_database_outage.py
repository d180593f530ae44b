"""PostgreSQL going away in the middle of an attempt costs the job nothing.

Stops the machine's PostgreSQL cluster (``restarts_postgres``: scripts/test runs these alone).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest

from pipeline.jobs import JobState
from pipeline.processing import OutcomeKind
from pipeline.store import JobStore, StoreSettings
from tests.fixtures.waiting import wait_for
from tests.integration.store.test_postgres_restart import pg_ctlcluster
from tests.integration.workers.conftest import Bench
from tests.integration.workers.samples import write_sample

pytestmark = pytest.mark.restarts_postgres


def _running() -> bool:
    return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"], check=False).returncode == 0


@pytest.fixture
def quick_store(store_settings: StoreSettings) -> Iterator[JobStore]:
    """A store that gives up on a dead database within a second (the default waits longer)."""
    store = JobStore(store_settings.model_copy(update={"pool_timeout_s": 1.0}))
    yield store
    store.close()


def test_a_database_lost_before_storing_hands_the_job_back_uncharged(
    make_bench: Callable[..., Bench], quick_store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")
    bench = make_bench(job_store=quick_store, processing={"lease_s": 120, "db_retry_s": 1})
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 30))
    # Converted, then the database goes away before the results are stored.
    bench.runner.after_unit = lambda: pg_ctlcluster("stop")

    def bring_it_back() -> None:
        wait_for(
            lambda: any("database unreachable" in r.getMessage() for r in caplog.records),
            timeout=60,
            message="the processor to meet the outage",
        )
        pg_ctlcluster("start")

    restarter = threading.Thread(target=bring_it_back)
    restarter.start()
    try:
        outcome = bench.processor.process(job_id)
    finally:
        restarter.join(timeout=120)
        if restarter.is_alive() or not _running():  # whatever happened, leave it running
            pg_ctlcluster("start")

    assert (outcome.kind, outcome.code) == (OutcomeKind.RETRY, "E401")
    assert not outcome.attempt_spent and outcome.countdown_s is not None
    job = quick_store.get_job(job_id)
    assert job is not None and job.state is JobState.RETRYING
    assert (job.attempt, job.attempts_spent) == (1, 0), "the outage cost no attempt"
    assert job.lease_owner is None and quick_store.list_results(job_id) == []

    assert quick_store.make_due(job_id)  # its message, on time
    bench.runner.after_unit = None
    assert bench.processor.process(job_id).kind is OutcomeKind.SUCCEEDED
    assert [r.attempt for r in quick_store.list_results(job_id)] == [2]
