"""Rounds through real worker processes: many documents in flight in one pool process.

A pool process killed while its round has calls in flight loses no job and doubles no result,
also when part of the round is already stored; a job cancelled while its round runs stops
alone.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from pipeline.jobs.model import Job, JobState, Stage
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.processes import process_gone
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster, WorkerProcess
from tests.support.worker_results import CONVERT, assert_one_result_set, pool_process_of

ROUND = {
    "DOCLANE_ROUND_MAX_DOCS": "8",
    "DOCLANE_SERVER_CONCURRENCY": "3",
    "DOCLANE_BATCH_MAX_DOCS": "1",
}


def one_round_in_flight(
    cluster: Cluster, worker: WorkerProcess, ids: list[UUID], server: FakeServer
) -> tuple[int, list[Job]] | None:
    """Every job claimed by one pool process, and the server holding three calls at once."""
    jobs = cluster.jobs(ids)
    if any(j.state is not JobState.RUNNING for j in jobs):
        return None
    holders = {pool_process_of(j, worker) for j in jobs}
    if len(holders) != 1 or server.stats()["tool_calls_in_flight"] != 3:
        return None
    return holders.pop(), jobs


def the_hanging_job(cluster: Cluster, ids: list[UUID]) -> Job | None:
    """The one job whose convert hangs, once every other job of its round is converted (and
    stored, or waiting for its group's commit)."""
    jobs = cluster.jobs(ids)
    stuck = [j for j in jobs if j.state is JobState.RUNNING and j.stage is Stage.CONVERTING]
    others = [j for j in jobs if j not in stuck]
    waiting = all(
        (j.state is JobState.RUNNING and j.stage is Stage.EXPORTING)
        or j.state is JobState.SUCCEEDED
        for j in others
    )
    return stuck[0] if len(stuck) == 1 and waiting else None


def test_a_pool_process_killed_mid_round_loses_no_job_and_doubles_no_result(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(redis_broker, fake_server.url, **ROUND)
    # Every convert takes ten minutes until the kill; from then on every call answers at once.
    fake_server.configure(delay_s=600, delay_tools=[CONVERT])
    ids = cluster.submit([write_sample(tmp_path, "md", n) for n in range(1, 9)]).job_ids
    worker = cluster.start_worker(concurrency=1)

    pid, _ = wait_for(
        lambda: one_round_in_flight(cluster, worker, ids, fake_server),
        timeout=60,
        message="eight jobs in one round, three calls in flight",
    )
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: process_gone(pid), message="the pool process to die")
    fake_server.configure(delay_s=0)
    jobs = cluster.wait_terminal(ids, timeout=120)

    assert_one_result_set(cluster, jobs)
    for number, job in enumerate(jobs, start=1):
        assert f"# Notes {number}" in (cluster.store.reads.get_result(job.id, "md") or "")
        assert job.attempt >= 2, "each job was requeued after the killed attempt's lease lapsed"


def test_a_pool_process_killed_with_part_of_its_round_stored_loses_and_doubles_nothing(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    """A round stores its converted documents in groups while a call is still in flight: killed
    then, the stored jobs keep their one result of the killed attempt, and only the job whose
    call was in flight is converted again."""
    cluster = make_cluster(redis_broker, fake_server.url, **ROUND)
    fake_server.configure(fail_next=1, fail_with="hang", fail_tools=[CONVERT])
    ids = cluster.submit([write_sample(tmp_path, "md", n) for n in range(1, 9)]).job_ids
    worker = cluster.start_worker(concurrency=1)

    def seven_stored_one_hanging() -> Job | None:
        hanging = the_hanging_job(cluster, ids)
        jobs = cluster.jobs(ids)
        stored = [j for j in jobs if j.state is JobState.SUCCEEDED]
        return hanging if hanging is not None and len(stored) == 7 else None

    hanging = wait_for(seven_stored_one_hanging, timeout=60, message="seven stored, one hanging")
    pid = pool_process_of(hanging, worker)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: process_gone(pid), message="the pool process to die")
    jobs = cluster.wait_terminal(ids, timeout=120)

    assert_one_result_set(cluster, jobs)
    for number, job in enumerate(jobs, start=1):
        assert f"# Notes {number}" in (cluster.store.reads.get_result(job.id, "md") or "")
        if job.id == hanging.id:
            assert job.attempt >= 2, "requeued after the killed attempt's lease lapsed"
        else:
            assert (job.attempt, job.attempts_spent) == (1, 1), "stored once, by the round"


def test_a_job_cancelled_mid_round_stops_alone_and_the_round_is_stored(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    """``doclane cancel`` of one job of a round with three calls in flight: its call is
    withdrawn, nothing is written for it, and the round's other jobs succeed on their first
    attempt in the same, never signalled, pool process."""
    cluster = make_cluster(any_broker, fake_server.url, **ROUND, DOCLANE_CANCEL_CHECK_S="0.2")
    fake_server.configure(fail_next=1, fail_with="hang", fail_tools=[CONVERT])
    ids = cluster.submit([write_sample(tmp_path, "md", n) for n in range(1, 5)]).job_ids
    worker = cluster.start_worker(concurrency=1)

    hanging = wait_for(
        lambda: the_hanging_job(cluster, ids), timeout=60, message="one call of the round hanging"
    )
    holder = pool_process_of(hanging, worker)
    out = cluster.cli_json("cancel", str(hanging.id))
    jobs = cluster.wait_terminal(ids, timeout=60)
    # The others may be stored already: the row is final at once, its call withdrawn when the
    # job's keeper next looks.
    wait_for(lambda: fake_server.stats()["cancelled"], message="the hanging call withdrawn")

    assert (out["previous_state"], out["state"]) == ("running", "cancelled")
    assert len(fake_server.stats()["cancelled"]) == 1, "its call, and only its, withdrawn"
    assert not process_gone(holder), "the pool process was never signalled"
    cancelled = [j for j in jobs if j.id == hanging.id]
    assert [j.state for j in cancelled] == [JobState.CANCELLED]
    assert cluster.store.reads.list_results(hanging.id) == []
    others = [j for j in jobs if j.id != hanging.id]
    assert_one_result_set(cluster, others)
    assert {(j.attempt, j.attempts_spent) for j in others} == {(1, 1)}
