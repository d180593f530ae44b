"""A worker host cut from the broker and from Redis (the breaker's state) mid-run.

The conversions it has in flight need neither: they finish and are stored. The other host
goes on taking the broker's messages; when the link heals, the cut host reconnects and takes
new work without a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.jobs import JobState, Stage
from tests.fixtures.processes import parent_of
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.network.fleet import Fleet, figures, write_figures

pytestmark = pytest.mark.network

CONVERT = "convert_document_into_docling_document"


def test_a_host_cut_from_the_broker_and_redis_finishes_what_it_holds_and_catches_up(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    fleet = make_fleet()
    cluster = fleet.cluster
    assert cluster is not None
    a, b = fleet.add_host(), fleet.add_host()
    fleet.fakes[0].configure(delay_s=1.0, delay_tools=[CONVERT])
    worker_a = fleet.start_worker(a, concurrency=1, beat=False)
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", n) for n in range(10)]).job_ids

    def a_converting() -> list[object]:
        return [
            j.id
            for j in cluster.jobs(ids)
            if j.state is JobState.RUNNING
            and j.stage is Stage.CONVERTING
            and j.lease_owner is not None
            and parent_of(int(j.lease_owner.rsplit(":", 1)[1])) == worker_a.pid
        ]

    held = set(wait_for(a_converting, timeout=60, message="host A converting"))
    a.cut(fleet.broker.port)
    a.cut(fleet.redis.port)
    fleet.start_worker(b, concurrency=1)

    jobs = cluster.wait_terminal(ids, timeout=150)
    assert all(j.state is JobState.SUCCEEDED for j in jobs), [j.state for j in jobs]
    assert all(j.attempt == 1 for j in jobs if j.id in held), "A stored what it held, once"

    a.heal()
    healed = time.monotonic()
    cluster.workers[1].stop()
    fleet.fakes[0].configure(delay_s=0)
    more = cluster.submit([write_sample(tmp_path / "more", "md", 100 + n) for n in range(3)])
    done = cluster.wait_terminal(more.job_ids, timeout=120)
    assert all(j.state is JobState.SUCCEEDED for j in done)
    assert worker_a.popen.poll() is None, "host A's worker was never restarted"
    row = figures("worker host cut from the broker and Redis", cluster, [*ids, *more.job_ids])
    row.heal_to_rate_s = time.monotonic() - healed
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)
