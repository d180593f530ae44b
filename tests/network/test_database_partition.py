"""A worker host cut from PostgreSQL: the fleet's fence against a host that comes back.

Host A is cut (a black hole: its packets to and from PostgreSQL are dropped, nothing resets)
in the middle of a round, for longer than its lease. Host B's reconciler requeues A's jobs and B
converts them. When A comes back, whatever it tries to write for the jobs it lost is refused by
the attempt's fence, and A goes on converting new jobs without a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs import JobState, Stage
from tests.fixtures.processes import parent_of
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.network.fleet import Fleet, figures, write_figures

pytestmark = pytest.mark.network

CONVERT = "convert_document_into_docling_document"


def test_a_host_cut_from_postgresql_loses_its_jobs_to_the_fleet_and_every_late_write_is_fenced(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    fleet = make_fleet()
    a, b = fleet.add_host(), fleet.add_host()
    # A conversion outlasts the lease (3 s) and the time B takes to requeue the job: A's
    # attempt is still converting when the link heals, and only then tries to store.
    fleet.fakes[0].configure(delay_s=6.0, delay_tools=[CONVERT])
    worker_a = fleet.start_worker(a, concurrency=1)
    cluster = fleet.cluster
    assert cluster is not None
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", n) for n in range(4)]).job_ids

    def a_converting() -> set[UUID]:
        return {
            j.id
            for j in cluster.jobs(ids)
            if j.state is JobState.RUNNING
            and j.stage is Stage.CONVERTING
            and j.lease_owner is not None
            and parent_of(int(j.lease_owner.rsplit(":", 1)[1])) == worker_a.pid
        }

    held = wait_for(a_converting, timeout=60, message="host A mid-round")
    a.cut(fleet.database.port)
    fleet.start_worker(b, concurrency=1)
    # B's reconciler finds A's lease expired and B claims the job again (attempt 2).
    wait_for(
        lambda: any(j.attempt >= 2 for j in cluster.jobs(list(held))),
        timeout=60,
        message="A's job taken over by B",
    )
    a.heal()
    healed = time.monotonic()
    # A's attempt comes back, converted, and tries to write: the fence refuses it.
    wait_for(
        lambda: (
            "no longer this attempt's" in worker_a.log() or "attempt lost its job" in worker_a.log()
        ),
        timeout=60,
        message="host A's late writes refused",
    )
    fleet.fakes[0].configure(delay_s=0)
    jobs = cluster.wait_terminal(ids, timeout=120)
    assert all(j.state is JobState.SUCCEEDED for j in jobs), [j.state for j in jobs]
    assert all(j.attempt >= 2 for j in jobs if j.id in held), "A's jobs ran again elsewhere"
    row = figures("worker host cut from PostgreSQL", cluster, ids)
    assert (row.lost, row.doubled) == (0, 0), row

    # A resumes without a restart: B goes away, and new jobs are converted by A alone.
    cluster.workers[1].stop()
    more = cluster.submit([write_sample(tmp_path / "more", "md", 100 + n) for n in range(4)])
    done = cluster.wait_terminal(more.job_ids, timeout=90)
    assert all(j.state is JobState.SUCCEEDED for j in done)
    assert worker_a.popen.poll() is None, "host A's worker was never restarted"
    row.heal_to_rate_s = time.monotonic() - healed
    row.jobs += len(more.job_ids)
    write_figures(row)
