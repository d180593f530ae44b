"""Workers whose server is a docling-mcp child of each pool process: no HTTP server at all.

``DOCLING_MCP_COMMAND="docling-mcp-server --transport stdio"`` and no origin: each pool process
starts its own child on its first job, converts through it, and stops it on shutdown; a child
killed mid-conversion costs a retry, not the job; a killed worker leaves no child behind.
Children are found in the process table by the ``CACHE_DIR`` their worker passed down.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.jobs.model import JobState
from tests.fixtures.brokers import Broker
from tests.fixtures.examples import EXPECTED_MARKDOWN, docling_mcp_samples
from tests.fixtures.processes import parent_of, process_gone
from tests.fixtures.stdio_children import (
    docling_stdio_command,
    docling_stdio_environment,
    marked_children,
)
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster

pytestmark = pytest.mark.docling


def stdio_cluster(make_cluster: Callable[..., Cluster], broker: Broker, cache_dir: Path) -> Cluster:
    cluster = make_cluster(
        broker,
        "",
        DOCLING_MCP_COMMAND=docling_stdio_command(),
        DOCLANE_SERVER_CACHE_DIR=str(cache_dir),
        DOCLANE_LEASE_S="30",
        **docling_stdio_environment(cache_dir),
    )
    del cluster.env["DOCLING_MCP_ORIGIN"]  # no server anywhere: the command is the server
    return cluster


def test_each_pool_process_converts_through_its_own_child(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "docling-cache"
    cache_dir.mkdir()
    cluster = stdio_cluster(make_cluster, redis_broker, cache_dir)
    # One job a call, so that both pool processes take some (a batch or a round would carry
    # all six samples to one process and one child; test_batches_through_a_child covers that).
    worker = cluster.start_worker(
        concurrency=2, extra_env={"DOCLANE_BATCH_MAX_DOCS": "1", "DOCLANE_ROUND_MAX_DOCS": "1"}
    )
    assert marked_children(cache_dir) == []  # started lazily, by the first job

    submission = cluster.submit(docling_mcp_samples(), formats=("md", "json"), no_dedup=True)
    jobs = cluster.wait_terminal(submission.job_ids, timeout=300)

    by_name = {Path(j.source_uri).name: j for j in jobs}
    assert sorted(by_name) == sorted(EXPECTED_MARKDOWN)
    for name, fragments in EXPECTED_MARKDOWN.items():
        job = by_name[name]
        assert job.state is JobState.SUCCEEDED, (name, job.error_code, job.error_message)
        markdown = cluster.store.reads.get_result(job.id, "md") or ""
        for fragment in fragments:
            assert fragment in markdown, (name, fragment)
        document = json.loads(cluster.store.reads.get_result(job.id, "json") or "null")
        assert document["schema_name"] == "DoclingDocument"

    children = marked_children(cache_dir)
    owners = [parent_of(pid) for pid in children]
    assert len(children) == 2, cluster.logs()  # one per pool process ...
    assert len(set(owners)) == 2  # ... each its own
    assert all(parent_of(owner) == worker.pid for owner in owners)  # pool processes of ours

    worker.terminate()  # warm shutdown: each pool process stops its child in order
    worker.wait(60)
    wait_for(lambda: not marked_children(cache_dir), message="every child stopped")
    assert len(re.findall(r"MCP server child \d+ stopped", worker.log())) == 2, worker.tail()


def test_a_child_killed_mid_conversion_costs_a_retry_and_a_killed_worker_no_orphan(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "docling-cache"
    cache_dir.mkdir()
    cluster = stdio_cluster(make_cluster, redis_broker, cache_dir)
    worker = cluster.start_worker(concurrency=1)
    source = tmp_path / "killed-mid-conversion.html"
    source.write_text("<html><body><h1>Killed mid-conversion</h1><p>Still here.</p></body></html>")

    (job_id,) = cluster.submit([str(source)], formats=("md",), no_dedup=True).job_ids
    # The child logs each conversion it starts on stderr, which the worker logs.
    wait_for(
        lambda: f"Converting document locally: {source}" in worker.log(),
        timeout=120,
        interval=0.005,
        message="the child converting the file",
    )
    (first,) = marked_children(cache_dir)
    os.kill(first, signal.SIGKILL)

    (job,) = cluster.wait_terminal([job_id], timeout=180)
    assert job.state is JobState.SUCCEEDED, (job.error_code, job.error_message, cluster.logs())
    assert "Still here." in (cluster.store.reads.get_result(job.id, "md") or "")
    assert "killed by SIGKILL" in worker.log()
    assert process_gone(first)
    (second,) = marked_children(cache_dir)
    assert second != first

    # SIGKILL the whole worker (its process group): nothing runs its shutdown code, yet its
    # pool process's child must not outlive it (PR_SET_PDEATHSIG).
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(30)
    wait_for(lambda: process_gone(second), timeout=30, message="the orphan child gone")
    assert marked_children(cache_dir) == []


def test_batches_through_a_child(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, tmp_path: Path
) -> None:
    """The six samples in one directory call of a pool process's own docling-mcp child."""
    cache_dir = tmp_path / "docling-cache"
    cache_dir.mkdir()
    cluster = stdio_cluster(make_cluster, redis_broker, cache_dir)
    cluster.start_worker(concurrency=1, extra_env={"DOCLANE_BATCH_MAX_DOCS": "8"})

    submission = cluster.submit(docling_mcp_samples(), formats=("md",), no_dedup=True)
    jobs = cluster.wait_terminal(submission.job_ids, timeout=300)

    assert [j.state for j in jobs] == [JobState.SUCCEEDED] * len(EXPECTED_MARKDOWN)
    for job in jobs:
        notes = [
            e.detail for e in cluster.store.reads.events(job.id) if e.detail and "batch" in e.detail
        ]
        assert notes and notes[0]["size"] == len(EXPECTED_MARKDOWN), job.source_uri
        markdown = cluster.store.reads.get_result(job.id, "md") or ""
        for fragment in EXPECTED_MARKDOWN[Path(job.source_uri).name]:
            assert fragment in markdown
