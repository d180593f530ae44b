"""A long PDF converted by the whole fleet as slices, through the real docling-rs-mcp.

The sliced conversion's Markdown equals the whole document's; a worker killed (SIGKILL) while
slices run loses and doubles nothing; cancelling the document cancels the slices not yet done.
The PDFs are the project's own (tests/support/long_pdf.py): a heading and two paragraphs a page.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs.model import Job, JobState
from pipeline.settings.tree import read_settings
from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.docling_rs_cluster import ENGINE, stdio_cluster
from tests.support.long_pdf import write_long_pdf

pytestmark = pytest.mark.docling

PAGES = 200
SLICE_PAGES = 32
FORMATS = ("chunks", "md", "text")


def slices_of(cluster: Cluster, parent_id: UUID) -> list[Job]:
    return cluster.store.reads.slices(parent_id)


def submit(cluster: Cluster, pdf: Path, slice_pages: int) -> UUID:
    settings = read_settings(submit=dict(slice_pages=slice_pages)).submit
    made = cluster.submit([pdf], FORMATS, no_dedup=True, submit_settings=settings)
    return made.job_ids[0]


@pytest.fixture
def long_pdf(docling_rs_root: Path, tmp_path: Path) -> Path:
    return write_long_pdf(docling_rs_root / f"{tmp_path.name}-report.pdf", pages=PAGES)


@pytest.fixture
def cluster(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, docling_rs_root: Path
) -> Cluster:
    """Workers (none started yet) with docling-rs-mcp as each pool process's stdio child."""
    return stdio_cluster(make_cluster, redis_broker, [docling_rs_root])


def test_the_sliced_markdown_equals_the_whole_documents(cluster: Cluster, long_pdf: Path) -> None:
    cluster.start_worker(concurrency=2)
    whole_id = submit(cluster, long_pdf, slice_pages=0)
    sliced_id = submit(cluster, long_pdf, slice_pages=SLICE_PAGES)
    whole, sliced = cluster.wait_terminal([whole_id, sliced_id], timeout=300)

    assert whole.state is JobState.SUCCEEDED and whole.slices_total is None
    assert sliced.state is JobState.SUCCEEDED, (sliced.error_code, sliced.error_message)
    assert (sliced.slices_total, sliced.slices_done) == (7, 7)
    slices = slices_of(cluster, sliced_id)
    assert [s.options["pages"] for s in slices] == (
        ["1-32", "33-64", "65-96", "97-128", "129-160", "161-192", "193-200"]
    )
    assert {(s.state, s.attempt) for s in slices} == {(JobState.SUCCEEDED, 1)}
    for fmt in ("md", "text"):
        assert cluster.store.reads.get_result(sliced_id, fmt) == cluster.store.reads.get_result(
            whole_id, fmt
        )
    assert {r.engine for r in cluster.store.reads.list_results(sliced_id)} == {ENGINE}
    shown = cluster.cli("status", str(sliced_id), "--no-events").stdout
    assert "succeeded (7 of 7 slices done)" in shown
    assert f"pages 33-64 of job {sliced_id}" in cluster.cli("status", str(slices[1].id)).stdout


def sections(markdown: str) -> list[int]:
    """The page headings of a conversion, in order (each page has one: "Section N")."""
    return [int(line.split()[-1]) for line in markdown.splitlines() if "Section " in line]


def test_a_worker_killed_mid_slices_loses_and_doubles_nothing(
    cluster: Cluster, long_pdf: Path
) -> None:
    victim = cluster.start_worker(concurrency=2)
    parent_id = submit(cluster, long_pdf, slice_pages=4)  # 50 slices
    wait_for(
        lambda: any(s.state is JobState.RUNNING for s in slices_of(cluster, parent_id)),
        timeout=60,
        message="a slice running",
    )

    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(30)
    killed_midway = cluster.store.reads.get_job(parent_id)
    assert killed_midway is not None and killed_midway.state is JobState.WAITING
    cluster.start_worker(concurrency=2)
    [parent] = cluster.wait_terminal([parent_id], timeout=300)

    assert parent.state is JobState.SUCCEEDED, (parent.error_code, parent.error_message)
    assert sections(cluster.store.reads.get_result(parent_id, "md") or "") == list(
        range(1, PAGES + 1)
    )
    slices = slices_of(cluster, parent_id)
    assert len(slices) == 50 and {s.state for s in slices} == {JobState.SUCCEEDED}
    for piece in slices:  # one result set each, from the attempt that succeeded
        assert {r.attempt for r in cluster.store.reads.list_results(piece.id)} == {piece.attempt}


def test_cancelling_the_document_cancels_its_unfinished_slices(
    cluster: Cluster, long_pdf: Path
) -> None:
    parent_id = submit(cluster, long_pdf, slice_pages=4)  # 50 slices, no worker yet
    cluster.start_worker(concurrency=1)
    wait_for(
        lambda: any(s.state is JobState.SUCCEEDED for s in slices_of(cluster, parent_id)),
        timeout=60,
        message="a slice done",
    )

    cluster.cli("cancel", str(parent_id))

    parent = cluster.store.reads.get_job(parent_id)
    assert parent is not None and parent.state is JobState.CANCELLED
    states = [s.state for s in slices_of(cluster, parent_id)]
    assert JobState.CANCELLED in states
    assert set(states) <= {JobState.SUCCEEDED, JobState.CANCELLED}
    assert cluster.store.reads.list_results(parent_id) == []
