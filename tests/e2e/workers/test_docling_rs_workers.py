"""Workers converting through the real docling-rs-mcp: stdio children and an HTTP server.

What a user does with it: ``doclane submit report.pdf --pages 1-2 --to md,chunks --wait`` gives
two pages' markdown and their chunks, each result naming the engine that made it; every output
format of every sample; failures with their codes (a corrupt PDF is not retried); a password
that reaches the server and nothing else; options in dedup's key; and a submission with options
refused at the door when the configured server is docling-mcp.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs.model import EventKind, JobState
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.docling_rs_server import DoclingRsServer
from tests.fixtures.docling_server import DoclingServer
from tests.fixtures.examples import (
    EXPECTED_MARKDOWN,
    PDF_PAGE_HEADINGS,
    PDF_SAMPLE,
    example,
)
from tests.fixtures.samples import write_sample
from tests.fixtures.workers import Cluster
from tests.support.docling_rs_cluster import ENGINE, stdio_cluster

pytestmark = pytest.mark.docling

EVERY_FORMAT = "md,json,html,text,chunks"


def test_two_pages_of_a_pdf_as_markdown_and_chunks_through_stdio_children(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, docling_rs_root: Path
) -> None:
    cluster = stdio_cluster(make_cluster, redis_broker, [docling_rs_root])
    cluster.start_worker(concurrency=2)
    pdf = str(example(PDF_SAMPLE))

    out = cluster.cli_json("submit", pdf, "--pages", "1-2", "--to", "md,chunks", "--wait")
    assert out["ok"], out
    (job,) = out["jobs"]
    markdown = cluster.cli("result", job["job_id"], "--format", "md").stdout
    first, second, third = PDF_PAGE_HEADINGS
    assert first in markdown and second in markdown and third not in markdown
    chunks = json.loads(cluster.cli("result", job["job_id"], "--format", "chunks").stdout)
    texts = [chunk["text"] for chunk in chunks["hierarchical"]]
    assert second in texts and third not in " ".join(texts)
    results = cluster.store.reads.list_results(job["job_id"])
    assert {(r.format, r.engine) for r in results} == {("md", ENGINE), ("chunks", ENGINE)}

    # The options are part of dedup's key: the same pages again is the same job, others are not.
    again = cluster.cli_json("submit", pdf, "--pages", "1-2", "--to", "md,chunks")
    assert again["accepted"][0]["deduplicated"] and again["accepted"][0]["job_id"] == job["job_id"]
    other = cluster.cli_json("submit", pdf, "--pages", "1-3", "--to", "md,chunks")
    assert not other["accepted"][0]["deduplicated"]

    refused = cluster.cli_json("submit", pdf, "--pages", "0-2", check=False)
    assert refused["error"]["code"] == "E110"


def test_every_format_of_every_sample_and_each_failure_over_http(
    make_cluster: Callable[..., Cluster],
    make_api_server: Callable[..., ApiServer],
    redis_broker: Broker,
    docling_rs_server: DoclingRsServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(
        redis_broker,
        docling_rs_server.url,
        DOCLING_MCP_AUTH="bearer",
        DOCLING_MCP_TOKEN=docling_rs_server.token,
    )
    cluster.start_worker(concurrency=2)
    samples = [str(example(name)) for name in [*sorted(EXPECTED_MARKDOWN), PDF_SAMPLE]]
    corrupt = docling_rs_server.root / "corrupt-report.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 8)
    outside = tmp_path / "outside.docx"  # doclane may read it; the server may not
    outside.write_bytes(example("quarterly-report.docx").read_bytes())

    submission = cluster.submit(
        [*samples, str(corrupt), str(outside)], EVERY_FORMAT.split(","), no_dedup=True
    )
    jobs = {Path(j.source_uri).name: j for j in cluster.wait_terminal(submission.job_ids)}

    for name in [*EXPECTED_MARKDOWN, PDF_SAMPLE]:
        job = jobs[name]
        assert job.state is JobState.SUCCEEDED, (name, job.error_code, job.error_message)
        markdown = cluster.store.reads.get_result(job.id, "md") or ""
        for fragment in EXPECTED_MARKDOWN.get(name, PDF_PAGE_HEADINGS):
            assert fragment in markdown, (name, fragment)
        assert json.loads(cluster.store.reads.get_result(job.id, "chunks") or "{}")["hierarchical"]
        assert (cluster.store.reads.get_result(job.id, "text") or "").strip()
        assert {r.engine for r in cluster.store.reads.list_results(job.id)} == {ENGINE}

    api = make_api_server(cluster.env)  # the API serves the new formats, with their types
    pdf_job = jobs[PDF_SAMPLE].id
    for fmt, media in (("text", "text/plain"), ("chunks", "application/json")):
        served = api.get(f"/v1/jobs/{pdf_job}/result/{fmt}")
        assert served.status_code == 200 and served.headers["content-type"].startswith(media)
    results = api.get(f"/v1/jobs/{pdf_job}").json()["results"]
    assert {r["engine"] for r in results} == {ENGINE}

    broken = jobs[corrupt.name]
    assert (broken.state, broken.error_code, broken.attempts_spent) == (JobState.FAILED, "E306", 1)
    assert "not a readable PDF" in (broken.error_message or "")
    far = jobs[outside.name]
    assert (far.state, far.error_code) == (JobState.FAILED, "E315")
    assert f"--root {tmp_path}" in (far.error_message or "")

    # An upload lands in the inbox, which this server was not given: E315 names the inbox and
    # its setting, which every upload shares, not the folder of this one upload.
    sent = api.post("/v1/jobs", files={"file": ("notes.md", b"# Notes\n\nUploaded.\n")})
    assert sent.status_code == 202, sent.text
    [upload] = cluster.wait_terminal([UUID(sent.json()["accepted"][0]["job_id"])])
    inbox = cluster.env["DOCLANE_INBOX_DIR"]
    assert (upload.state, upload.error_code) == (JobState.FAILED, "E315")
    message = upload.error_message or ""
    fix = f"DOCLANE_INBOX_DIR, where uploads and downloads land: start it with --root {inbox} "
    assert fix in message, message
    assert f"--root {Path(upload.source_uri).parent}" not in message


def test_a_password_reaches_the_server_and_nothing_else(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, docling_rs_root: Path
) -> None:
    secret = "correct-horse-battery-staple"
    cluster = stdio_cluster(make_cluster, redis_broker, [docling_rs_root], REPORT_PW=secret)
    cluster.start_worker(concurrency=1)
    pdf = str(example(PDF_SAMPLE))

    given = cluster.cli_json("submit", pdf, "--password-env", "REPORT_PW", "--wait", "--no-dedup")
    missing = cluster.cli_json(
        "submit", pdf, "--password-env", "NOT_ON_THE_WORKER", "--wait", "--no-dedup", check=False
    )

    job_id = given["jobs"][0]["job_id"]
    assert given["jobs"][0]["state"] == "succeeded"
    assert missing["jobs"][0]["error_code"] == "E110"
    shown = cluster.cli("status", job_id, "--json").stdout + json.dumps(
        [e.model_dump(mode="json") for e in cluster.store.reads.events(job_id)]
    )
    assert "REPORT_PW" in shown and secret not in shown
    assert secret not in cluster.logs()


def test_docling_mcp_says_it_cannot_honour_options(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, docling_server: DoclingServer
) -> None:
    cluster = make_cluster(redis_broker, docling_server.url)
    cluster.start_worker(concurrency=1)
    out = cluster.cli_json(
        "submit", str(example("handbook.html")), "--pages", "1", "--wait", "--no-dedup", check=False
    )
    # refused at submission: the door asked the configured server what it can do
    assert out["ok"] is False and out["error"]["code"] == "E305"
    assert "cannot honour conversion options (pages)" in out["error"]["message"]
    assert cluster.store.reads.count_in_flight()[JobState.QUEUED] == 0


def test_a_cache_folder_makes_no_batch_for_a_server_without_the_directory_tool(
    make_cluster: Callable[..., Cluster],
    make_api_server: Callable[..., ApiServer],
    redis_broker: Broker,
    docling_rs_root: Path,
    tmp_path: Path,
) -> None:
    """The tour's ``DOCLANE_SERVER_CACHE_DIR`` with docling-rs-mcp, which has no directory
    tool: the small jobs of a submission are converted on their first attempt, no job's history
    tells of a batch, the workers warn of nothing, and the batch counters stay at zero."""
    cluster = stdio_cluster(
        make_cluster,
        redis_broker,
        [docling_rs_root],
        DOCLANE_SERVER_CACHE_DIR=str(tmp_path / "server-cache"),
        DOCLANE_BATCH_MAX_DOCS="4",
    )
    cluster.start_worker(concurrency=1)
    folder = docling_rs_root / tmp_path.name
    samples = [write_sample(folder, "md", n) for n in range(1, 7)]

    jobs = cluster.wait_terminal(cluster.submit(samples).job_ids)

    for number, job in enumerate(jobs, start=1):
        assert job.state is JobState.SUCCEEDED, (job.error_code, job.error_message)
        assert (job.attempt, job.attempts_spent) == (1, 1), "no attempt went to a batch"
        assert f"# Notes {number}" in (cluster.store.reads.get_result(job.id, "md") or "")
        notes = [e.detail for e in cluster.store.reads.events(job.id) if e.kind is EventKind.NOTE]
        assert not [n for n in notes if n and "batch" in n], notes
    logs = cluster.logs()
    assert "E399" not in logs and "not batched" not in logs
    assert "no batches: the server offers no directory tool" in logs
    stats = cluster.cli_json("stats", check=False)
    assert stats["batches_last_hour"]["batches"] == 0, stats["batches_last_hour"]
    scraped = make_api_server(cluster.env).get("/metrics").text
    assert "doclane_batches_last_hour 0.0" in scraped
    assert "doclane_batched_documents_last_hour 0.0" in scraped
