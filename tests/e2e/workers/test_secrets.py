"""A presigned URL: the worker fetches it whole; nobody else ever sees its signature.

Through the real entry points: ``doclane submit`` and ``doclane status`` (text and JSON), the
job's events, its error when the fetch fails, the worker's log. The whole URL is kept in one
place only, ``jobs.source_fetch_uri``, which the worker's claim reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from pipeline.jobs.model import JobState
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.workers import Cluster

SIGNATURE = "5e2f0c9d8b7a6f5e4d3c2b1a09f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0"
CREDENTIAL = "AKIAEXAMPLEKEYID42%2F20261123%2Fus-east-1%2Fs3%2Faws4_request"
CUSTOM = "cdn-policy-3b9f"
QUERY = (
    f"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={CREDENTIAL}"
    f"&X-Amz-Date=20261123T080000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
    f"&X-Amz-Signature={SIGNATURE}&Policy={CUSTOM}"
)
SECRETS = (SIGNATURE, CREDENTIAL, "AKIAEXAMPLEKEYID42", CUSTOM)


def assert_no_secret(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} shows {secret}"


def test_a_presigned_url_is_fetched_whole_and_shown_masked_everywhere(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    http_source: Any,
    migrated_database_url: str,
) -> None:
    http_source.serve(
        "/report.md" + QUERY, b"# Quarterly\n\nsigned\n", content_type="text/markdown"
    )
    http_source.fail("/missing.md" + QUERY, 404)
    cluster = make_cluster(
        redis_broker, fake_server.url, DOCLANE_SECRET_QUERY_PARAMS="Policy, Key-Pair-Id"
    )
    worker = cluster.start_worker(concurrency=1)
    good, bad = http_source.url("/report.md" + QUERY), http_source.url("/missing.md" + QUERY)

    submitted = cluster.cli("submit", good, bad, "--json", "--wait", check=False)
    assert_no_secret("submit --json --wait", submitted.stdout + submitted.stderr)
    jobs = {j["source"].split("?")[0].rsplit("/", 1)[1]: j for j in _jobs(submitted.stdout)}
    ok, failed = jobs["report.md"], jobs["missing.md"]
    assert ok["state"] == "succeeded" and failed["state"] == "failed"
    assert "X-Amz-Signature=***" in ok["source"] and "Policy=***" in ok["source"]

    # The worker fetched the whole URL: the source server saw the signature.
    assert any(SIGNATURE in request.path for request in http_source.requests)
    for job in (ok, failed):
        for args in (("status", job["job_id"], "--json"), ("status", job["job_id"])):
            shown = cluster.cli(*args, check=False)
            assert_no_secret(" ".join(args), shown.stdout + shown.stderr)
        for event in cluster.store.reads.events(job["job_id"]):
            assert_no_secret("an event", event.model_dump_json())
    failed_job = cluster.store.reads.get_job(failed["job_id"])
    assert failed_job is not None and failed_job.state is JobState.FAILED
    assert failed_job.error_code and failed_job.error_message
    assert_no_secret("the error", failed_job.model_dump_json())
    assert "report.md" in cluster.cli("status", ok["job_id"]).stdout
    cluster.stop_all()
    assert_no_secret("the worker's log", worker.log_path.read_text())

    # One place keeps the whole URL: the column the claim reads.
    with psycopg.connect(migrated_database_url) as conn:
        kept = dict(conn.execute("SELECT id::text, source_fetch_uri FROM jobs").fetchall())
    assert kept[ok["job_id"]] == good and kept[failed["job_id"]] == bad


def _jobs(stdout: str) -> list[dict[str, Any]]:
    import json

    report: dict[str, Any] = json.loads(stdout)
    return list(report["jobs"])
