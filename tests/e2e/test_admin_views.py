"""The admin views after a real run: workers convert some documents and fail others with E101,
then ``doclane stats|jobs|retry``, the HTTP API, ``/metrics`` and the status page (in headless
Chromium) must all tell that run as it happened."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs import JobState
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.integration.workers.samples import write_sample

GOOD, GONE = 4, 3


def test_a_run_with_successes_and_e101_failures_as_every_view_tells_it(
    make_cluster: Callable[..., Cluster],
    make_api_server: Callable[..., ApiServer],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(redis_broker, fake_server.url)
    docs = tmp_path / "docs"
    good = [write_sample(docs, "md", n) for n in range(GOOD)]
    gone = [write_sample(tmp_path / "gone", "md", 100 + n) for n in range(GONE)]
    submission = cluster.submit([*map(str, good), *map(str, gone)])
    assert not submission.rejected
    ids = {Path(a.uri).name: a.job_id for a in submission.accepted}
    for path in gone:  # deleted after submission: the worker's own check fails them with E101
        path.unlink()
    cluster.start_worker(concurrency=2)
    jobs = cluster.wait_terminal(submission.job_ids)
    failed = {j.id for j in jobs if j.state is JobState.FAILED}
    assert failed == {ids[p.name] for p in gone}
    assert {j.error_code for j in jobs if j.id in failed} == {"E101"}

    # ---- doclane stats --json
    stats = wait_for(
        lambda: (s := cluster.cli_json("stats")) and s["workers"] and s,
        timeout=30,
        message="stats with a live worker",
    )
    assert stats["ok"] is True and stats["unreachable"] == {}
    assert stats["jobs"] == {
        "queued": 0, "running": 0, "retrying": 0,
        "succeeded": GOOD, "failed": GONE, "cancelled": 0,
    }  # fmt: skip
    [e101] = stats["failures"]
    assert (e101["code"], e101["last_hour"], e101["all_time"]) == ("E101", GONE, GONE)
    assert e101["title"] == "source not found or unreadable"
    small = next(t for t in stats["conversion_time"] if t["tier"] == "small")
    assert small["jobs"] == GOOD and 0 <= small["p50_s"] <= small["p95_s"]
    assert stats["throughput"]["last_60m"]["finished"] == GOOD + GONE
    assert sum(stats["throughput"]["per_minute"]) == GOOD + GONE
    assert fake_server.origin in {b["origin"] for b in stats["breakers"]}
    assert all(b["state"] == "closed" for b in stats["breakers"])
    assert {q["queue"] for q in stats["queues"]} >= {"doclane.small", "doclane.large"}
    assert len(stats["workers"]) == 1 and stats["workers"][0]["concurrency"] == 2
    text = cluster.cli("stats").stdout
    assert f"succeeded {GOOD}" in text and "E101" in text and "source not found" in text

    # ---- doclane jobs
    listed = cluster.cli_json("jobs", "--state", "failed")["jobs"]
    assert {UUID(j["id"]) for j in listed} == failed
    by_code = cluster.cli_json("jobs", "--error-code", "E101", "--since", "1h")["jobs"]
    assert {UUID(j["id"]) for j in by_code} == failed
    assert cluster.cli_json("jobs", "--error-code", "E303")["jobs"] == []
    newest = cluster.cli_json("jobs", "--limit", "2")["jobs"]
    assert len(newest) == 2 and newest[0]["created_at"] >= newest[1]["created_at"]
    bad = cluster.cli("jobs", "--since", "yesterday", check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr

    # ---- the HTTP API, /metrics and the page, over real HTTP
    api = make_api_server(cluster.env)
    http_stats = wait_for(
        lambda: (r := api.get("/v1/stats").json()) and r["workers"] and r, timeout=30
    )
    assert http_stats["jobs"] == stats["jobs"]
    assert http_stats["failures"][0]["code"] == "E101"
    assert api.get("/v1/stats", token=None).status_code == 401
    wrong = api.get("/v1/stats", token="not-the-token")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
    listed_http = api.get("/v1/jobs", params={"state": "failed"}).json()["jobs"]
    assert {UUID(j["id"]) for j in listed_http} == failed

    metrics = api.get("/metrics", token=None).text
    assert f'doclane_jobs{{state="succeeded"}} {float(GOOD)}' in metrics
    assert f'doclane_jobs{{state="failed"}} {float(GONE)}' in metrics
    assert f'doclane_job_failures_total{{error_code="E101"}} {float(GONE)}' in metrics
    convert = re.search(
        r'doclane_mcp_calls_total\{outcome="ok",tool="convert_document_into_docling_document"\} '
        r"([\d.]+)",
        metrics,
    )
    assert convert and float(convert.group(1)) == GOOD
    count = re.search(
        r'doclane_mcp_call_duration_seconds_count\{tool="convert_document_into_docling_document"\}'
        r" ([\d.]+)",
        metrics,
    )
    assert count and float(count.group(1)) == GOOD
    assert f'doclane_breaker_state{{origin="{fake_server.origin}",state="closed"}} 1.0' in metrics
    assert 'doclane_queue_depth{queue="doclane.small"} 0.0' in metrics

    dom = _rendered_page(api.url + "/", tmp_path)
    assert re.search(rf'id="jobs-succeeded">{GOOD}<', dom), dom
    assert re.search(rf'id="jobs-failed">{GONE}<', dom)
    assert re.search(rf'id="failures-E101-all">{GONE}<', dom)
    assert "source not found or unreadable" in dom and fake_server.origin in dom
    assert re.search(r'id="workers">1<', dom) and '<svg id="chart"' in dom

    # ---- bulk retry: the files are back, the failed jobs run again as new jobs
    for path in gone:
        write_sample(path.parent, "md", 100 + gone.index(path))
    retried = cluster.cli_json("retry", "--failed", "--error-code", "E101")
    assert retried["ok"] is True
    assert {UUID(r["retry_of"]) for r in retried["retried"]} == failed
    again = cluster.wait_terminal([UUID(r["job_id"]) for r in retried["retried"]])
    assert [j.state for j in again] == [JobState.SUCCEEDED] * GONE
    old = cluster.cli_json("status", str(next(iter(failed))))
    assert any(
        (e.get("detail") or {}).get("retried_as") for e in old["events"] if e["kind"] == "note"
    )


def test_an_upload_converts_and_its_result_comes_back(
    make_cluster: Callable[..., Cluster],
    make_api_server: Callable[..., ApiServer],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(redis_broker, fake_server.url)
    cluster.start_worker(concurrency=1)
    api = make_api_server(cluster.env, DOCLANE_MAX_SOURCE_BYTES="4096")
    inbox = Path(cluster.env["DOCLANE_INBOX_DIR"])

    sent = api.post(
        "/v1/jobs",
        files={"file": ("notes.md", b"# Uploaded notes\n\nHello from HTTP.\n", "text/markdown")},
        data={"to": "md", "priority": "3"},
    )
    assert sent.status_code == 202, sent.text
    [accepted] = sent.json()["accepted"]
    assert (accepted["source"], accepted["uri"]) == ("notes.md", "notes.md")
    job_id = UUID(accepted["job_id"])
    [job] = cluster.wait_terminal([job_id])
    assert job.state is JobState.SUCCEEDED and job.priority == 3

    result = api.get(f"/v1/jobs/{job_id}/result/md")
    assert result.status_code == 200 and "Uploaded notes" in result.text
    assert result.headers["content-type"].startswith("text/markdown")
    detail = api.get(f"/v1/jobs/{job_id}").json()
    assert detail["job"]["state"] == "succeeded" and detail["error"] is None
    assert [r["format"] for r in detail["results"]] == ["md"]
    assert any(e["tool"] for e in detail["events"] if e["kind"] == "mcp_call")
    assert api.get(f"/v1/jobs/{job_id}/result/html").json()["error"]["code"] == "not_found"

    too_big = api.post("/v1/jobs", files={"file": ("big.md", b"#" * 10_000, "text/markdown")})
    assert too_big.status_code == 413
    assert too_big.json()["error"]["code"] == "E103"
    streamed = _chunked_upload(api, b"x" * 10_000)  # no Content-Length: the cap while writing
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "E103"
    uploads = [p for p in (inbox / "uploads").rglob("*") if p.is_file()]
    assert [p.name for p in uploads] == ["notes.md"], "refused uploads leave nothing behind"

    refused = api.post("/v1/jobs", json={"sources": ["/nowhere/at/all.docx", str(uploads[0])]})
    body = refused.json()
    assert refused.status_code == 202
    assert [r["code"] for r in body["rejected"]] == ["E101"]
    assert body["accepted"][0]["deduplicated"] is True  # the same content already succeeded

    unknown = api.get("/v1/jobs/6f1d2c1e-0000-4000-8000-000000000000")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "E108"
    assert api.get("/v1/jobs/not-a-uuid").status_code == 422
    finished = api.post(f"/v1/jobs/{job_id}/cancel")
    assert finished.status_code == 409 and finished.json()["error"]["code"] == "wrong_state"
    succeeded = api.post(f"/v1/jobs/{job_id}/retry")
    assert succeeded.status_code == 409 and "succeeded" in succeeded.json()["error"]["message"]
    assert api.get("/readyz", token=None).json() == {
        "ok": True,
        "parts": {"database": "ok", "broker": "ok"},
    }
    assert api.get("/healthz", token=None).json()["ok"] is True


def _rendered_page(url: str, tmp_path: Path) -> str:
    """The page's DOM as headless Chromium renders it (and a screenshot beside the test's
    files, for a person to look at)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed (scripts/test installs it: ensure_chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    subprocess.run(
        [
            chromium,
            *flags,
            f"--screenshot={tmp_path / 'status.png'}",
            "--window-size=1000,1200",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    done = subprocess.run(
        [chromium, *flags, "--dump-dom", url], check=True, capture_output=True, timeout=120
    )
    return done.stdout.decode()


def _chunked_upload(api: ApiServer, content: bytes) -> object:
    import httpx

    boundary = "doclane-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.md"\r\n'
        "Content-Type: text/markdown\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> object:
        yield head
        for start in range(0, len(content), 1000):
            yield content[start : start + 1000]
        yield tail

    return httpx.post(
        api.url + "/v1/jobs",
        content=body(),
        headers={
            "Authorization": f"Bearer {api.token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
        timeout=30,
    )
