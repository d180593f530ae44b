"""A slow link between a worker host and PostgreSQL (100 ms each way, 200 ms a round trip).

Every statement costs a round trip more than on loopback, so the fleet converts more slowly,
but a lease is renewed well within its term: no job is requeued for a lease that looked
expired, every job runs once, on its first attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.jobs.model import EventKind, JobState
from tests.fixtures.samples import write_sample
from tests.support.network.fleet import Fleet, figures, write_figures

pytestmark = pytest.mark.network

ONE_WAY_S = 0.1


def test_a_slow_link_to_postgresql_slows_the_host_and_expires_no_lease(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    fleet = make_fleet()
    cluster = fleet.cluster
    assert cluster is not None
    host = fleet.add_host()
    fleet.database.delay(host.address, ONE_WAY_S)
    fleet.start_worker(host, concurrency=2)
    began = time.monotonic()
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", n) for n in range(16)]).job_ids
    jobs = cluster.wait_terminal(ids, timeout=180)
    elapsed = time.monotonic() - began

    assert all(j.state is JobState.SUCCEEDED and j.attempt == 1 for j in jobs), [
        (j.state, j.attempt) for j in jobs
    ]
    requeued = [
        e
        for job_id in ids
        for e in cluster.store.reads.events(job_id)
        if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.QUEUED and e.attempt >= 1
    ]
    assert requeued == [], "no lease expired on the slow link"
    row = figures(f"{int(ONE_WAY_S * 1000)} ms each way to PostgreSQL", cluster, ids)
    assert (row.lost, row.doubled, row.repeated) == (0, 0, 0), row
    print(f"slow link: {len(ids)} jobs in {elapsed:.1f}s ({len(ids) / elapsed:.2f} jobs/s)")
    write_figures(row)
