"""The examples folder through real worker processes and the real docling-mcp server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.jobs.model import JobState
from tests.fixtures.brokers import Broker
from tests.fixtures.docling_server import DoclingServer
from tests.fixtures.examples import EXPECTED_MARKDOWN, docling_mcp_samples
from tests.fixtures.workers import Cluster

pytestmark = pytest.mark.docling


def test_the_examples_convert_through_workers_on_the_real_server(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    docling_server: DoclingServer,
) -> None:
    cluster = make_cluster(
        redis_broker,
        docling_server.url,
        DOCLANE_SERVER_CACHE_DIR=str(docling_server.cache_dir),
        DOCLANE_LEASE_S="30",
    )
    cluster.start_worker(concurrency=2)

    submission = cluster.submit(docling_mcp_samples(), formats=("md", "json"), no_dedup=True)
    jobs = cluster.wait_terminal(submission.job_ids, timeout=240)

    by_name = {Path(j.source_uri).name: j for j in jobs}
    assert sorted(by_name) == sorted(EXPECTED_MARKDOWN)
    for name, fragments in EXPECTED_MARKDOWN.items():
        job = by_name[name]
        assert job.state is JobState.SUCCEEDED, (name, job.error_code, job.error_message)
        markdown = cluster.store.reads.get_result(job.id, "md") or ""
        for fragment in fragments:
            assert fragment in markdown, (name, fragment, markdown)
        document = json.loads(cluster.store.reads.get_result(job.id, "json") or "null")
        assert document["schema_name"] == "DoclingDocument"
    # every result names the engine, as the server named itself; these small files go through
    # the directory tool's batches, whose results were once stored without it
    results = [r for j in jobs for r in cluster.store.reads.list_results(j.id)]
    assert {r.engine for r in results} == {"docling"}
