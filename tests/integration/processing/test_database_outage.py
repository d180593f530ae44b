"""PostgreSQL going away in the middle of an attempt costs the job nothing.

Stops the machine's PostgreSQL cluster (``restarts_postgres``: scripts/test runs these alone).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

import pytest

from pipeline.jobs.model import JobState
from pipeline.mcp.client import McpClient
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.postgres import pg_ctlcluster
from tests.support.processing import Bench

pytestmark = pytest.mark.restarts_postgres
CONVERT = "convert_document_into_docling_document"


def _running() -> bool:
    return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"], check=False).returncode == 0


@pytest.fixture
def quick_store(store_settings: StoreSettings) -> Iterator[JobStore]:
    """A store that gives up on a dead database within a second (the default waits longer)."""
    store = JobStore(store_settings.model_copy(update={"pool_timeout_s": 1.0}))
    yield store
    store.close()


class StopDatabaseAfterConvert:
    """The real client; PostgreSQL is stopped right after the first conversion answers, so the
    rest of the unit (the ``exporting`` stage, the export call) meets a dead database."""

    def __init__(self, client: McpClient) -> None:
        self._client = client
        self.stopped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def call_tool(self, name: str, arguments: Any = None, **kwargs: Any) -> Any:
        result = self._client.call_tool(name, arguments, **kwargs)
        if name == CONVERT and not self.stopped:
            self.stopped = True
            pg_ctlcluster("stop")
        return result


def run_through_outage(
    bench: Bench, job_id: UUID, caplog: pytest.LogCaptureFixture, waits_for: str
) -> Outcome:
    """Process the job; start PostgreSQL again once the processor logs ``waits_for``."""

    def bring_it_back() -> None:
        wait_for(
            lambda: any(waits_for in r.getMessage() for r in caplog.records),
            timeout=90,
            message=f"the processor to log {waits_for!r}",
        )
        pg_ctlcluster("start")

    restarter = threading.Thread(target=bring_it_back)
    restarter.start()
    try:
        return bench.take(job_id)
    finally:
        restarter.join(timeout=120)
        if restarter.is_alive() or not _running():  # whatever happened, leave it running
            pg_ctlcluster("start")


def test_a_database_lost_inside_the_unit_never_converts_again(
    make_bench: Callable[..., Bench], quick_store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The stage bookkeeping between convert and export meets the outage: it is skipped (a
    progress report), the export goes on, and the results wait for the database. The retry
    layer, which would take a retryable E401 for a reason to convert again, never sees one.

    Progress is not held here (``progress_hold_s=0``): a held stage of a document this quick
    would go with the results, never on its own, and the write under test would not happen."""
    caplog.set_level("INFO")
    processing = {"lease_s": 120, "db_retry_s": 1, "progress_hold_s": 0}
    bench = make_bench(job_store=quick_store, processing=processing)
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 31))
    bench.runner.wrap_client = StopDatabaseAfterConvert
    converts_before = bench.server.stats()["requests_by_tool"].get(CONVERT, 0)

    outcome = run_through_outage(bench, job_id, caplog, "while storing the results")

    assert outcome.kind is OutcomeKind.SUCCEEDED
    assert bench.server.stats()["requests_by_tool"][CONVERT] == converts_before + 1
    assert any("could not record the exporting stage" in r.getMessage() for r in caplog.records)
    job = quick_store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED
    assert (job.attempt, job.attempts_spent) == (1, 1)
    assert [r.attempt for r in quick_store.reads.list_results(job_id)] == [1]


def test_a_database_lost_before_storing_waits_and_stores_the_same_conversion(
    make_bench: Callable[..., Bench], quick_store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")
    bench = make_bench(job_store=quick_store, processing={"lease_s": 120, "db_retry_s": 1})
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 30))
    # Converted, then the database goes away before the results are stored.
    bench.runner.after_unit = lambda: pg_ctlcluster("stop")

    outcome = run_through_outage(bench, job_id, caplog, "while storing the results")

    assert outcome.kind is OutcomeKind.SUCCEEDED
    assert bench.server.stats()["requests_by_tool"][CONVERT] == 1
    job = quick_store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.SUCCEEDED
    assert (job.attempt, job.attempts_spent) == (1, 1)


def test_a_database_gone_longer_than_a_lease_hands_the_job_back_uncharged(
    make_bench: Callable[..., Bench], quick_store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Waiting is bounded by the lease; past it the job is handed back, uncharged, once the
    database answers (here: it answers while the hand-back waits)."""
    caplog.set_level("INFO")
    bench = make_bench(job_store=quick_store, processing={"lease_s": 10, "db_retry_s": 1})
    job_id = bench.submit_one(write_sample(bench.folder, "docx", 32))
    bench.runner.after_unit = lambda: pg_ctlcluster("stop")

    outcome = run_through_outage(bench, job_id, caplog, "while handing the job back")

    assert (outcome.kind, outcome.code) == (OutcomeKind.RETRY, "E401")
    assert not outcome.attempt_spent and outcome.countdown_s is not None
    job = quick_store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.RETRYING
    assert (job.attempt, job.attempts_spent) == (1, 0), "the outage cost no attempt"
    assert job.lease_owner is None and quick_store.reads.list_results(job_id) == []

    assert quick_store.operations.make_due(job_id)  # its message, on time
    bench.runner.after_unit = None
    assert bench.take(job_id).kind is OutcomeKind.SUCCEEDED
    assert [r.attempt for r in quick_store.reads.list_results(job_id)] == [2]
