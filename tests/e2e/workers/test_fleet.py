"""The whole flow through real worker processes: many documents, two workers, both brokers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from pipeline.jobs.model import EventKind, JobState
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_mixed, write_sample
from tests.fixtures.workers import Cluster
from tests.support.worker_results import CONVERT, assert_one_result_set


def test_two_hundred_mixed_documents_through_two_workers(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    count = 200
    cluster = make_cluster(
        any_broker, fake_server.url, DOCLANE_SERVER_CACHE_DIR=str(fake_server.cache_dir)
    )
    paths = write_mixed(tmp_path / "docs", count)
    # Four processes may each hold a batch of 8 in the server's cache until it is exported, as
    # doclane's scripts allow for on the real server (DOCLING_MCP_CACHE_MAX_DOCUMENTS); with the
    # default of 10, evicted keys are converted again (correct, but not "exactly once").
    fake_server.configure(cache_max_documents=64)
    first = cluster.start_worker(concurrency=2)
    second = cluster.start_worker(concurrency=2)

    submission = cluster.submit([str(tmp_path / "docs")], formats=("md", "json"))
    assert len(submission.accepted) == count and not submission.rejected
    jobs = cluster.wait_terminal(submission.job_ids, timeout=240)

    assert [j.state for j in jobs] == [JobState.SUCCEEDED] * count, cluster.logs()
    assert_one_result_set(cluster, jobs)
    # Nothing converted twice: the server converted each document exactly once, one by one or
    # in a batch of its directory tool (the cache folder lets the workers batch small files).
    stats = fake_server.stats()
    assert stats["requests_by_tool"].get(CONVERT, 0) + stats["directory_conversions"] == count
    assert stats["directory_calls"], "small documents went in batches"
    owners = {
        (e.detail or {}).get("worker")
        for job in jobs
        for e in cluster.store.reads.events(job.id)
        if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.SUCCEEDED
    }
    assert len(owners) >= 2, f"the work was shared between processes: {owners}"
    md = cluster.store.reads.get_result(jobs[0].id, "md") or ""
    assert Path(paths[0]).stem.replace("sample-", "") in md or "Notes 0" in md
    assert json.loads(cluster.store.reads.get_result(jobs[0].id, "json") or "null")
    assert first.popen.poll() is None and second.popen.poll() is None


def test_the_cli_submits_waits_and_prints_the_markdown(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(redis_broker, fake_server.url)
    write_mixed(tmp_path / "docs", 6)
    cluster.start_worker(concurrency=2)

    out = cluster.cli_json("submit", str(tmp_path / "docs"), "--wait")

    assert out["ok"] is True
    assert [j["state"] for j in out["jobs"]] == ["succeeded"] * 6
    md_job = next(j for j in out["jobs"] if j["source"].endswith(".md"))
    markdown = cluster.cli("result", md_job["job_id"], "--format", "md").stdout
    assert "# Notes 0" in markdown and "| n | 0 |" in markdown
    status = cluster.cli_json("status", md_job["job_id"])
    assert status["job"]["state"] == "succeeded"
    assert [e["tool"] for e in status["events"] if e["kind"] == "mcp_call"] == [
        "convert_document_into_docling_document",
        "export_docling_document_to_markdown",
    ]
    text = cluster.cli("status", md_job["job_id"]).stdout
    assert "succeeded" in text and "convert_document_into_docling_document ok" in text


def test_bad_sources_get_their_codes_and_disturb_nothing_else(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    good = [write_sample(docs, kind, n) for n, kind in enumerate(("md", "docx", "csv"))]
    (docs / "empty.html").write_bytes(b"")
    (docs / "binary.pptx").write_bytes(b"\x00\x01 not an office file")
    (tmp_path / "notes.txt").write_text("not a document type")
    vanishing = write_sample(tmp_path / "later", "md", 99)
    cluster = make_cluster(redis_broker, fake_server.url)

    submission = cluster.submit(
        [
            str(docs),
            str(tmp_path / "nope.docx"),
            "http://169.254.169.254/latest/x.md",
            str(tmp_path / "notes.txt"),
            str(vanishing),
        ],
    )
    vanishing.unlink()  # accepted, then gone before any worker looks at it
    cluster.start_worker(concurrency=2)
    jobs = cluster.wait_terminal(submission.job_ids)

    refused = sorted(r.code for r in submission.rejected)
    assert refused == ["E101", "E102", "E102", "E104", "E106"]
    by_source = {j.source_uri: j for j in jobs}
    assert [by_source[str(p)].state for p in good] == [JobState.SUCCEEDED] * 3
    gone = by_source[str(vanishing)]
    assert (gone.state, gone.error_code) == (JobState.FAILED, "E101")
    assert not any(e.kind is EventKind.MCP_CALL for e in cluster.store.reads.events(gone.id))


def test_reconcile_and_retry_by_hand(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(redis_broker, fake_server.url)
    lost = cluster.submit([write_sample(tmp_path, "md", 1)]).job_ids[0]
    redis_broker.flush()  # the bell is gone before any worker heard it

    report = cluster.cli_json("reconcile")
    assert report["ok"] and report["rung"] == {"doclane.small": 1}

    fake_server.configure(
        fail_next=1, fail_with="is_error", fail_tools=["convert_document_into_docling_document"]
    )
    cluster.start_worker(concurrency=1)
    [done] = cluster.wait_terminal([lost])
    assert (done.state, done.error_code) == (JobState.FAILED, "E306")

    retried = cluster.cli_json("retry", str(lost))
    assert retried["action"] == "resubmitted" and retried["retry_of"] == str(lost)
    [again] = cluster.wait_terminal([UUID(retried["job_id"])])
    assert again.state is JobState.SUCCEEDED and again.id != lost
    assert cluster.cli("status", str(lost)).stdout.count("E306") >= 1
