"""Checks the worker end-to-end tests share: one result set per job, a worker's pool process."""

from __future__ import annotations

from pipeline.jobs.model import EventKind, Job, JobState
from tests.fixtures.processes import parent_of
from tests.fixtures.workers import Cluster, WorkerProcess

CONVERT = "convert_document_into_docling_document"


def pool_process_of(job: Job, worker: WorkerProcess) -> int:
    """The pid of the worker's pool process holding the job's lease (``host:pid``)."""
    assert job.lease_owner is not None
    pid = int(job.lease_owner.rsplit(":", 1)[1])
    assert parent_of(pid) == worker.pid, "the lease holder is a pool process of our worker"
    return pid


def assert_one_result_set(cluster: Cluster, jobs: list[Job]) -> None:
    """Each job succeeded exactly once, from one attempt, with one conversion behind it.

    Rows alone prove little (the primary key forbids a second result row per format): what
    counts is the trail. One ``succeeded`` transition per job, and the attempt that stored the
    results converted as many times as its note says it did (once, or twice after an
    eviction), with no successful conversion recorded by any other attempt after it.
    """
    for job in jobs:
        assert job.state is JobState.SUCCEEDED, (job.id, job.state, job.error_code)
        results = cluster.store.reads.list_results(job.id)
        assert [r.format for r in results] == list(job.formats)
        assert {r.attempt for r in results} == {job.attempt}
        events = cluster.store.reads.events(job.id)
        succeeded = [e for e in events if e.to_state is JobState.SUCCEEDED]
        assert len(succeeded) == 1, f"{job.id} succeeded {len(succeeded)} times"
        converts = [
            e
            for e in events
            if e.kind is EventKind.MCP_CALL and e.outcome == "ok" and e.tool in CONVERT_TOOLS
        ]
        notes = [e.detail or {} for e in events if e.kind is EventKind.NOTE]
        assert [e.attempt for e in converts if e.attempt >= job.attempt] == [job.attempt] * (
            notes[-1].get("conversions", 1) if notes else 1
        ), f"{job.id}: conversions after the stored one"


CONVERT_TOOLS = frozenset(
    {CONVERT, "convert_directory_files_into_docling_document", "convert_docx", "convert_xlsx",
     "convert_pptx", "convert_pdf", "convert_url"}
)  # fmt: skip
