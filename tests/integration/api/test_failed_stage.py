"""A failed job's stage is where it failed, and every door says so: ``doclane status``, the
API's job and the console's job page (the worker's side: tests/integration/processing/
test_processor.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import httpx

from errors import SourceNotFound
from pipeline.jobs.model import JobState, SourceKind, Stage
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.support.store_builders import new_job


def test_a_job_that_failed_fetching_says_so_everywhere(
    make_api_server: Callable[..., ApiServer], test_database_env: dict[str, str], store: JobStore
) -> None:
    spec = new_job(source_kind=SourceKind.URL, source_uri="https://example.org/gone.pdf")
    job_id = store.submissions.create(spec, dedup=False).job_id
    claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
    assert claimed is not None
    gone = SourceNotFound("https://example.org/gone.pdf answered 404")
    assert store.attempts.fail(job_id, claimed.attempt, gone, stage=Stage.FETCHING)
    job = store.reads.get_job(job_id)
    assert job is not None and (job.state, job.stage) == (JobState.FAILED, Stage.FETCHING)

    shown = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status", str(job_id), "--no-events"],
        env=test_database_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "state    failed (E101 while fetching)" in shown.stdout, shown.stderr
    as_json = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status", str(job_id), "--json"],
        env=test_database_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert json.loads(as_json.stdout)["job"]["stage"] == "fetching"

    api = make_api_server(test_database_env)
    assert api.get(f"/v1/jobs/{job_id}").json()["job"]["stage"] == "fetching"
    console = httpx.Client(base_url=api.url, timeout=30)
    console.post("/console/login", data={"token": api.token, "next": "/console/jobs"})
    page = console.get(f"/console/jobs/{job_id}").text
    assert '<b id="stage">fetching</b>' in page
