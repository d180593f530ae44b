"""PostgreSQL fails over while the fleet runs: nothing committed is lost, everything ends once.

A primary with a synchronous standby of the test's own (tests/support/network/replicas.py). The
worker host and the API host reach them through one multi-host connection string with
``target_session_attrs=read-write``; mid-run the primary crashes (stopped at once) and the
standby is promoted. Every result committed before the crash is still there (the standby had
it before the commit returned), the jobs in flight are finished on the new primary, and the
API answers and takes a submission again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.jobs.model import JobState
from pipeline.settings.tree import read_settings
from pipeline.store.database import apply_migrations
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.network.fleet import Fleet, figures, write_figures
from tests.support.network.replicas import ReplicaPair

pytestmark = pytest.mark.network

CONVERT = "convert_document_into_docling_document"


@pytest.fixture
def replicas(_namespaces_allowed: None) -> Iterator[ReplicaPair]:
    pair = ReplicaPair()
    try:
        pair.primary.query("CREATE DATABASE doclane")
        apply_migrations(read_settings(store=dict(database_url=pair.url("doclane"))).store)
        yield pair
    finally:
        pair.close()


def test_a_failover_to_the_synchronous_standby_loses_no_committed_result(
    make_fleet: Callable[..., Fleet], replicas: ReplicaPair, tmp_path: Path
) -> None:
    fleet = make_fleet(database_url=replicas.url("doclane"), DOCLANE_DATABASE_TCP_TIMEOUT_S="4")
    cluster = fleet.cluster
    assert cluster is not None
    worker_host, api_host = fleet.add_host(), fleet.add_host()
    fleet.fakes[0].configure(delay_s=0.3, delay_tools=[CONVERT])
    worker = fleet.start_worker(worker_host, concurrency=2)
    api = fleet.start_api(api_host, tmp_path)
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", n) for n in range(24)]).job_ids

    def committed() -> set[object]:
        return {j.id for j in cluster.jobs(ids) if j.state is JobState.SUCCEEDED}

    before = wait_for(lambda: committed() if len(committed()) >= 4 else None, timeout=90)
    replicas.fail_over()
    failed_over = time.monotonic()

    jobs = cluster.wait_terminal(ids, timeout=180)
    assert all(j.state is JobState.SUCCEEDED for j in jobs), [(j.state, j.error_code) for j in jobs]
    assert before <= committed(), "a result committed before the failover is gone"
    assert worker.popen.poll() is None, "the worker rode the failover without a restart"
    assert replicas.standby.query("SELECT pg_is_in_recovery()") == [(False,)]

    wait_for(
        lambda: api.get("/readyz", token=None).status_code == 200,
        timeout=60,
        interval=0.5,
        message="the API on the new primary",
    )
    sent = api.post("/v1/jobs", json={"sources": [str(write_sample(tmp_path / "api", "md", 99))]})
    assert sent.status_code == 202, sent.text
    from uuid import UUID

    more = [UUID(a["job_id"]) for a in sent.json()["accepted"]]
    cluster.wait_terminal(more, timeout=60)
    row = figures("PostgreSQL fails over to its standby", cluster, [*ids, *more])
    row.heal_to_rate_s = time.monotonic() - failed_over
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)
