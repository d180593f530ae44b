"""A worker host cut from PostgreSQL: the fleet's fence against a host that comes back.

Host A converts a job; mid-conversion its link to PostgreSQL is cut (a black hole: its packets
to and from PostgreSQL are dropped, nothing resets) for longer than its lease. A finishes the
conversion and sends the results into the hole. Host B's reconciler requeues the job and B
claims it (attempt 2), whose conversion the fake server holds. When the link heals, A's store
arrives while attempt 2 runs: only the attempt's fence (``finish_attempt`` matches the job's
attempt) stands between it and the job, and it is refused. The job's history shows it: A's
calls and note (kept, they happened) between attempt 2's claim and attempt 2's success, one
result set, attempt 2's. A then converts new jobs in the same processes, without a restart.

Without the hold on B's conversion B could finish first, and A's write would be refused by the
job's state instead; without the settings below A would never send its store at all: the
exporting stage's progress write, fenced too, is refused first, or the store gives up within
a lease while the link is still cut. Either way the result's fence would go untested.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs.model import EventKind, JobState
from tests.fixtures.processes import parent_of
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import WorkerProcess
from tests.support.network.fleet import (
    Fleet,
    changes_to,
    figures,
    pool_pid,
    succeeded_in,
    write_figures,
)

pytestmark = pytest.mark.network

CONVERT = "convert_document_into_docling_document"
#: Host A's conversion: long enough for the test to cut the link while it runs.
CONVERT_S = 3.0
SETTINGS = {
    # A statement sent into the black hole waits for the link instead of failing first (the
    # default, 20 s, can end before the heal on a loaded machine): A's store arrives late.
    "DOCLANE_DATABASE_TCP_TIMEOUT_S": "60",
    # Connections open when the link goes, as a busy worker has: the store borrows one while
    # the lease renewal holds another, rather than waiting on a connect into the hole.
    "DOCLANE_POOL_MIN_SIZE": "3",
    # Stages held longer than any attempt here: the attempt's first write after its claim is
    # its results', so the late write is the store, not a progress report.
    "DOCLANE_PROGRESS_HOLD_S": "60",
}


def attempt_ended(worker: WorkerProcess, job_id: UUID) -> list[str]:
    """The worker's lines saying how its attempt of ``job_id`` ended: it lost the job (and
    where it found out), or it stored the results."""
    return [
        line
        for line in worker.log().splitlines()
        if f"job={job_id}" in line and ("attempt lost its job" in line or "succeeded in" in line)
    ]


def test_a_host_cut_from_postgresql_loses_its_jobs_to_the_fleet_and_every_late_write_is_fenced(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    fleet = make_fleet(**SETTINGS)
    cluster = fleet.cluster
    assert cluster is not None
    a, b = fleet.add_host(), fleet.add_host()
    fake = fleet.fakes[0]
    fake.configure(delay_s=CONVERT_S, delay_tools=[CONVERT])
    worker_a = fleet.start_worker(a, concurrency=1)
    [job_id] = cluster.submit([write_sample(tmp_path / "docs", "md", 0)]).job_ids

    def a_converting() -> int | None:
        job = cluster.jobs([job_id])[0]
        asked = fake.stats()["requests_by_tool"].get(CONVERT, 0)
        running = job.state is JobState.RUNNING and job.lease_owner is not None
        return pool_pid(job.lease_owner) if running and asked and job.lease_owner else None

    pid_a = wait_for(a_converting, timeout=60, interval=0.05, message="host A converting")
    assert parent_of(pid_a) == worker_a.pid
    a.cut(fleet.database.port)
    # The next conversion (B's, of the same job) hangs until the test lets it go.
    fake.configure(delay_s=0, fail_next=1, fail_with="hang", fail_tools=[CONVERT])
    worker_b = fleet.start_worker(b, concurrency=1)

    def b_holds_attempt_2() -> bool:
        job = cluster.jobs([job_id])[0]
        return (
            job.attempt == 2
            and job.state is JobState.RUNNING
            and fake.stats()["hanging_calls"] >= 1
        )

    wait_for(b_holds_attempt_2, timeout=60, message="B converting the job as attempt 2")
    a.heal()
    healed = time.monotonic()
    ended = wait_for(
        lambda: attempt_ended(worker_a, job_id), timeout=90, message="host A's late store"
    )
    assert "attempt lost its job (storing)" in ended[0], f"the fence refused A's store: {ended}"
    fake.reset()  # B's held call fails (E204) and its next try converts
    [job] = cluster.wait_terminal([job_id], timeout=60)

    events = cluster.store.reads.events(job_id)
    claim_2 = [e for e in changes_to(events, JobState.RUNNING) if e.attempt == 2]
    won = changes_to(events, JobState.SUCCEEDED)
    late = [e for e in events if e.kind is EventKind.NOTE and e.attempt == 1]
    assert job.state is JobState.SUCCEEDED and job.attempt == 2, job
    assert len(claim_2) == 1 and [e.attempt for e in won] == [2], events
    assert pool_pid((won[0].detail or {})["worker"]) != pid_a, "B's attempt won"
    assert late, "A's store reached the database (its note is kept, its results are not)"
    assert claim_2[0].at < late[0].at < won[0].at, "A's store met attempt 2 running"
    assert [r.attempt for r in cluster.store.reads.list_results(job_id)] == [2]
    row = figures("worker host cut from PostgreSQL", cluster, [job_id])
    assert (row.lost, row.doubled, row.repeated) == (0, 0, 1), row

    # A resumes without a restart: B goes away, and new jobs are converted by A's same process.
    worker_b.stop()
    more = cluster.submit([write_sample(tmp_path / "more", "md", 100 + n) for n in range(4)])
    done = cluster.wait_terminal(more.job_ids, timeout=90)
    assert all(j.state is JobState.SUCCEEDED for j in done)
    assert succeeded_in(cluster, more.job_ids) == {pid_a}, "A's pool process was never replaced"
    assert worker_a.popen.poll() is None, "host A's worker was never restarted"
    row = figures("worker host cut from PostgreSQL", cluster, [job_id, *more.job_ids])
    row.heal_to_rate_s = time.monotonic() - healed
    assert (row.lost, row.doubled, row.repeated) == (0, 0, 1), row
    write_figures(row)
