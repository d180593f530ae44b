"""Batches through real worker processes: a pool process killed mid-batch loses no job."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from pipeline.jobs.model import JobState, Stage
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.processes import process_gone
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.worker_results import assert_one_result_set, pool_process_of

DIRECTORY = "convert_directory_files_into_docling_document"


def test_a_pool_process_killed_mid_batch_loses_no_job_and_doubles_no_result(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(
        redis_broker,
        fake_server.url,
        DOCLANE_SERVER_CACHE_DIR=str(fake_server.cache_dir),
        DOCLANE_BATCH_MAX_DOCS="4",
        DOCLANE_RECONCILE_SCRATCH_MIN_AGE_S="0",
    )
    # The first batch call hangs until the kill; every later one answers at once.
    fake_server.configure(fail_next=1, fail_with="hang", fail_tools=[DIRECTORY])
    worker = cluster.start_worker(concurrency=1)
    ids = cluster.submit([write_sample(tmp_path, "md", n) for n in range(1, 5)]).job_ids

    def batch_running() -> list[int] | None:
        jobs = cluster.jobs(ids)
        running = [j for j in jobs if j.state is JobState.RUNNING and j.stage is Stage.CONVERTING]
        return [pool_process_of(j, worker) for j in running] if len(running) == 4 else None

    [pid, *others] = wait_for(batch_running, timeout=60, message="four jobs in one batch")
    assert set(others) == {pid}, "one pool process holds the whole batch"
    inbox = Path(cluster.env["DOCLANE_INBOX_DIR"])
    assert list(inbox.glob("batch-*")), "the batch folder is in the shared inbox"

    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: process_gone(pid), message="the pool process to die")
    jobs = cluster.wait_terminal(ids, timeout=120)

    assert_one_result_set(cluster, jobs)
    for number, job in enumerate(jobs, start=1):
        assert f"# Notes {number}" in (cluster.store.reads.get_result(job.id, "md") or "")
        assert job.attempt >= 2, "each job was requeued after the killed attempt's lease lapsed"
    wait_for(lambda: not list(inbox.glob("batch-*")), timeout=60, message="the folder swept")
