"""The admin views after a real run: workers convert some documents and fail others with E101,
then ``doclane stats|jobs|retry``, the HTTP API, ``/metrics`` and the status page (in headless
Chromium) must all tell that run as it happened."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from pipeline.jobs.model import Job, JobState
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer, start_api_server
from tests.fixtures.brokers import Broker
from tests.fixtures.database import ScratchDatabases, database_url
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.isolation import breaker_namespace
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster, new_cluster
from tests.support.brokers import CANDIDATE_DBS, claim_redis_broker

GOOD, GONE = 4, 3


@dataclass
class Run:
    """A finished run: workers converted GOOD documents and failed GONE with E101."""

    cluster: Cluster
    api: ApiServer
    server: FakeServer
    ids: dict[str, UUID]
    gone: list[Path]
    jobs: list[Job]

    @property
    def failed(self) -> set[UUID]:
        return {self.ids[path.name] for path in self.gone}


@pytest.fixture(scope="class")
def finished_run(
    test_databases: ScratchDatabases,
    migrated_template: str,
    _fake_server_process: FakeServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Run]:
    """One run for every view of it (each test reads it, none changes it but the last), built
    once: the workers, the broker, the database and the API outlive a single test."""
    server = _fake_server_process
    server.reset()
    folder = tmp_path_factory.mktemp("admin-run")
    url = database_url(test_databases.create(template=migrated_template))
    store = JobStore(read_settings(store=dict(database_url=url)).store)
    with ExitStack() as stack:
        stack.callback(store.close)
        broker = claim_redis_broker()
        if broker is None:
            pytest.fail(f"no free Redis database among {list(CANDIDATE_DBS)} for a test broker")
        stack.callback(broker.release)
        namespace = stack.enter_context(breaker_namespace())
        workdir = folder / "cluster"
        workdir.mkdir()
        cluster = new_cluster(broker, server.url, url, store, workdir,
                              {"DOCLANE_BREAKER_NAMESPACE": namespace})  # fmt: skip
        stack.callback(cluster.close)
        good = [write_sample(folder / "docs", "md", n) for n in range(GOOD)]
        gone = [write_sample(folder / "gone", "md", 100 + n) for n in range(GONE)]
        submission = cluster.submit([*map(str, good), *map(str, gone)])
        assert not submission.rejected
        for path in gone:  # deleted after submission: the worker's own check fails them (E101)
            path.unlink()
        cluster.start_worker(concurrency=2)
        jobs = cluster.wait_terminal(submission.job_ids)
        api = start_api_server(cluster.env, folder, "api")
        stack.callback(api.stop)
        ids = {Path(a.uri).name: a.job_id for a in submission.accepted}
        yield Run(cluster, api, server, ids, gone, jobs)


def with_a_live_worker(stats: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Stats once they show the worker (inspect answers a moment after it is ready)."""
    return wait_for(lambda: (s := stats()) and s["workers"] and s, timeout=30,
                    message="stats with a live worker")  # fmt: skip


EXPECTED_JOBS = {
    "queued": 0, "waiting": 0, "running": 0, "retrying": 0,
    "succeeded": GOOD, "failed": GONE, "cancelled": 0,
}  # fmt: skip


class TestARunWithSuccessesAndE101Failures:
    """Every view tells the run as it happened; one view a test, so one that is wrong does not
    hide the others. The bulk retry changes the run: it comes last."""

    def test_the_deleted_sources_fail_with_e101_and_the_others_succeed(
        self, finished_run: Run
    ) -> None:
        failed = {j.id for j in finished_run.jobs if j.state is JobState.FAILED}
        assert failed == finished_run.failed
        assert {j.error_code for j in finished_run.jobs if j.id in failed} == {"E101"}
        assert {j.state for j in finished_run.jobs if j.id not in failed} == {JobState.SUCCEEDED}

    def test_doclane_stats_json(self, finished_run: Run) -> None:
        stats = with_a_live_worker(lambda: finished_run.cluster.cli_json("stats"))
        assert stats["ok"] is True and stats["unreachable"] == {}
        assert stats["jobs"] == EXPECTED_JOBS
        [e101] = stats["failures"]
        assert (e101["code"], e101["last_hour"], e101["all_time"]) == ("E101", GONE, GONE)
        assert e101["title"] == "source not found or unreadable"
        small = next(t for t in stats["conversion_time"] if t["tier"] == "small")
        assert small["jobs"] == GOOD and 0 <= small["p50_s"] <= small["p95_s"]
        assert stats["throughput"]["last_60m"]["finished"] == GOOD + GONE
        assert sum(stats["throughput"]["per_minute"]) == GOOD + GONE
        assert finished_run.server.origin in {b["origin"] for b in stats["breakers"]}
        assert all(b["state"] == "closed" for b in stats["breakers"])
        assert {q["queue"] for q in stats["queues"]} >= {"doclane.small", "doclane.large"}
        assert len(stats["workers"]) == 1 and stats["workers"][0]["concurrency"] == 2

    def test_doclane_stats_text(self, finished_run: Run) -> None:
        text = finished_run.cluster.cli("stats").stdout
        assert f"succeeded {GOOD}" in text and "E101" in text and "source not found" in text

    def test_doclane_jobs_filters(self, finished_run: Run) -> None:
        cluster = finished_run.cluster
        listed = cluster.cli_json("jobs", "--state", "failed")["jobs"]
        assert {UUID(j["id"]) for j in listed} == finished_run.failed
        by_code = cluster.cli_json("jobs", "--error-code", "E101", "--since", "1h")["jobs"]
        assert {UUID(j["id"]) for j in by_code} == finished_run.failed
        assert cluster.cli_json("jobs", "--error-code", "E303")["jobs"] == []
        newest = cluster.cli_json("jobs", "--limit", "2")["jobs"]
        assert len(newest) == 2 and newest[0]["created_at"] >= newest[1]["created_at"]

    def test_doclane_jobs_refuses_a_bad_since_with_its_code(self, finished_run: Run) -> None:
        bad = finished_run.cluster.cli("jobs", "--since", "yesterday", check=False)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 2 and "Traceback" not in bad.stderr
        assert bad.stderr.startswith("E117 invalid argument: ")  # then what to do

    def test_the_http_stats(self, finished_run: Run) -> None:
        http_stats = with_a_live_worker(lambda: finished_run.api.get("/v1/stats").json())
        assert http_stats["jobs"] == EXPECTED_JOBS
        assert http_stats["failures"][0]["code"] == "E101"

    def test_the_http_api_wants_its_token(self, finished_run: Run) -> None:
        api = finished_run.api
        assert api.get("/v1/stats", token=None).status_code == 401
        wrong = api.get("/v1/stats", token="not-the-token")
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"

    def test_the_http_job_list(self, finished_run: Run) -> None:
        listed = finished_run.api.get("/v1/jobs", params={"state": "failed"}).json()["jobs"]
        assert {UUID(j["id"]) for j in listed} == finished_run.failed

    def test_metrics(self, finished_run: Run) -> None:
        metrics = finished_run.api.get("/metrics", token=None).text
        assert f'doclane_jobs{{state="succeeded"}} {float(GOOD)}' in metrics
        assert f'doclane_jobs{{state="failed"}} {float(GONE)}' in metrics
        assert f'doclane_job_failures_total{{error_code="E101"}} {float(GONE)}' in metrics
        convert = re.search(
            r'doclane_mcp_calls_total\{outcome="ok",tool="convert_document_into_docling_document"\}'
            r" ([\d.]+)",
            metrics,
        )
        assert convert and float(convert.group(1)) == GOOD
        count = re.search(
            r'doclane_mcp_call_duration_seconds_count\{tool="convert_document_into_docling_document"\}'
            r" ([\d.]+)",
            metrics,
        )
        assert count and float(count.group(1)) == GOOD
        origin = finished_run.server.origin
        assert f'doclane_breaker_state{{origin="{origin}",state="closed"}} 1.0' in metrics
        assert 'doclane_queue_depth{queue="doclane.small"} 0.0' in metrics
        assert 'doclane_queue_backlog{queue="doclane.small",tenant="default"} 0.0' in metrics

    def test_the_status_page(self, finished_run: Run, tmp_path: Path) -> None:
        api = finished_run.api
        with_a_live_worker(lambda: api.get("/v1/stats").json())  # the page's figures are ready
        dom = _rendered_page(api.url + "/", tmp_path)
        assert re.search(rf'id="jobs-succeeded">{GOOD}<', dom), dom
        assert re.search(rf'id="jobs-failed">{GONE}<', dom)
        assert re.search(rf'id="failures-E101-all">{GONE}<', dom)
        assert "source not found or unreadable" in dom and finished_run.server.origin in dom
        assert re.search(r'id="workers">1<', dom) and '<svg id="chart"' in dom

    def test_bulk_retry_runs_the_failed_jobs_again_as_new_jobs(self, finished_run: Run) -> None:
        """The files are back; the failed jobs run again. Last: it changes the run's counts."""
        cluster, gone = finished_run.cluster, finished_run.gone
        for path in gone:
            write_sample(path.parent, "md", 100 + gone.index(path))
        retried = cluster.cli_json("retry", "--failed", "--error-code", "E101")
        assert retried["ok"] is True
        assert {UUID(r["retry_of"]) for r in retried["retried"]} == finished_run.failed
        again = cluster.wait_terminal([UUID(r["job_id"]) for r in retried["retried"]])
        assert [j.state for j in again] == [JobState.SUCCEEDED] * GONE
        old = cluster.cli_json("status", str(next(iter(finished_run.failed))))
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
