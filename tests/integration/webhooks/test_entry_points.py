"""Webhooks and submissions through the API and the CLI: a cancel from the API is told to the
receiver; one submission's jobs are listed by its id; stats and /metrics count what waits;
``doclane webhooks`` lists and re-sends the dead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest

from pipeline.jobs.model import JobState
from pipeline.store.outbox import DeliveryState, WebhookOutbox
from pipeline.store.store import JobStore
from pipeline.webhooks.delivery import WebhookDispatcher
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from tests.fixtures.webhook_receiver import WebhookReceiver
from tests.support.store_builders import job_in_state


@pytest.fixture
def api_env(migrated_database_url: str, redis_broker: Broker, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
        "DOCLANE_INSPECT_TIMEOUT_S": "0.3",
    }


def metric(text: str, name: str) -> float:
    [line] = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(line.split()[-1])


def test_a_job_cancelled_through_the_api_is_told_to_its_webhook(
    make_api_server: Callable[..., ApiServer],
    api_env: dict[str, str],
    store: JobStore,
    webhook_receiver: WebhookReceiver,
    make_dispatcher: Callable[..., WebhookDispatcher],
    tmp_path: Path,
) -> None:
    api = make_api_server(api_env, DOCLANE_ALLOW_PRIVATE_URLS="true")
    docs = [tmp_path / f"{name}.md" for name in ("a", "b")]
    for doc in docs:
        doc.write_text(f"# {doc.stem}\n")
    sent = api.post(
        "/v1/jobs", json={"sources": [str(d) for d in docs], "webhook": webhook_receiver.url}
    ).json()
    job_ids = sorted(item["job_id"] for item in sent["accepted"])
    listed = api.get("/v1/jobs", params={"submission": sent["submission_id"]}).json()["jobs"]
    assert sorted(job["id"] for job in listed) == job_ids
    other = api.get("/v1/jobs", params={"submission": str(uuid4())}).json()
    assert other == {"jobs": [], "next_before": None}

    assert api.post(f"/v1/jobs/{job_ids[0]}/cancel").status_code == 200
    assert api.get("/v1/stats").json()["webhooks"] == {"pending": 1, "failed": 0, "dead": 0}
    scraped = api.get("/metrics").text
    assert metric(scraped, 'doclane_webhook_deliveries{state="pending"}') == 1.0
    webhook_receiver.refuse(1)
    # one delivery a pass: with the tiny retry delay, a slow pass would claim the refused one
    # again once due, deliver it, and leave nothing failed to count
    dispatcher = make_dispatcher(webhook_batch=1)
    assert len(dispatcher.deliver_due().failed) == 1  # tried, refused, still being retried
    assert api.get("/v1/stats").json()["webhooks"] == {"pending": 0, "failed": 1, "dead": 0}
    scraped = api.get("/metrics").text
    assert metric(scraped, 'doclane_webhook_deliveries{state="failed"}') == 1.0

    wait_for(lambda: dispatcher.deliver_due().delivered, message="the retry delivered")
    [received] = webhook_receiver.accepted
    assert received.event is not None and received.event["type"] == "job.cancelled"
    assert received.event["data"]["job_id"] == job_ids[0]
    assert received.event["data"]["submission_id"] == sent["submission_id"]


def test_a_webhook_on_a_loopback_address_refuses_the_submission(
    make_api_server: Callable[..., ApiServer],
    api_env: dict[str, str],
    store: JobStore,
    tmp_path: Path,
) -> None:
    api = make_api_server(api_env)
    doc = tmp_path / "a.md"
    doc.write_text("# a\n")
    answer = api.post(
        "/v1/jobs", json={"sources": [str(doc)], "webhook": "http://127.0.0.1:9/hook"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "E104"
    uploaded = api.post(
        "/v1/jobs",
        files={"file": ("b.md", b"# b\n", "text/markdown")},
        data={"webhook": "http://127.0.0.1:9/hook"},
    )
    assert uploaded.status_code == 422 and uploaded.json()["error"]["code"] == "E104"
    assert not any(store.reads.count_in_flight().values())  # no job was made
    uploads = tmp_path / "inbox" / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []  # nothing left to convert


def test_doclane_webhooks_lists_the_dead_and_sends_them_again(
    store: JobStore,
    webhook_receiver: WebhookReceiver,
    make_dispatcher: Callable[..., WebhookDispatcher],
    migrated_database_url: str,
) -> None:
    job = job_in_state(store, JobState.FAILED, webhook_url=webhook_receiver.url + "?token=s3cret")
    webhook_receiver.refuse(1)
    assert make_dispatcher(webhook_give_up_s=0.001).deliver_due().dead

    def doclane(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DOCLANE_DATABASE_URL": migrated_database_url}
        return subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "webhooks", *args],
            env=env, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip

    dead = json.loads(doclane("--dead", "--json").stdout)
    assert dead["counts"] == {"pending": 0, "failed": 0, "dead": 1}
    [row] = dead["deliveries"]
    assert row["job_id"] == str(job.id) and row["last_status"] == 503
    shown = doclane("--dead")
    assert str(job.id) in shown.stdout and "s3cret" not in shown.stdout + shown.stderr

    retried = json.loads(doclane("--dead", "--retry", "--json").stdout)
    assert retried["retried"] == [row["id"]] and retried["counts"]["dead"] == 0
    assert len(make_dispatcher().deliver_due().delivered) == 1
    assert WebhookOutbox(store.pool).listing(DeliveryState.PENDING) == []
