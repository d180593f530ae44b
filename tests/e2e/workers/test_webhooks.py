"""Completion webhooks through the real entry points: ``doclane submit --webhook --wait`` and
real workers, a receiver that verifies every event with Standard Webhooks' own library and is
down for its first tries, ``doclane jobs --submission`` and ``doclane webhooks``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.webhook_receiver import WEBHOOK_TIMINGS, WebhookReceiver
from tests.fixtures.workers import Cluster


def test_submit_with_a_webhook_tells_a_receiver_that_was_down_of_every_job_once(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    webhook_receiver: WebhookReceiver,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(
        redis_broker,
        fake_server.url,
        DOCLANE_WEBHOOK_SECRET=webhook_receiver.secret,
        **WEBHOOK_TIMINGS,
    )
    cluster.start_worker(concurrency=2)
    docs = [write_sample(tmp_path / "docs", "md", n) for n in range(3)]
    webhook_receiver.refuse(5)

    done = cluster.cli(
        "submit", *map(str, docs), "--webhook", webhook_receiver.url, "--wait", "--json"
    )
    submitted = json.loads(done.stdout)
    job_ids = sorted(item["job_id"] for item in submitted["accepted"])
    assert submitted["ok"] and len(job_ids) == 3

    wait_for(
        lambda: len(webhook_receiver.accepted) == 3, timeout=60, message="three events accepted"
    )
    requests = webhook_receiver.requests
    assert all(r.verify_error is None for r in requests), requests
    assert sum(1 for r in requests if r.status == 503) == 5
    accepted = webhook_receiver.accepted
    assert sorted(r.event["data"]["job_id"] for r in accepted) == job_ids  # type: ignore[index]
    assert all(r.event["type"] == "job.succeeded" for r in accepted)  # type: ignore[index]
    assert len({r.event_id for r in accepted}) == 3  # one id per event, each accepted once
    assert {r.event_id for r in requests} == {r.event_id for r in accepted}

    listed = cluster.cli_json("jobs", "--submission", submitted["submission_id"])
    assert sorted(job["id"] for job in listed["jobs"]) == job_ids
    assert f"submission {submitted['submission_id']}" in cluster.cli("status", job_ids[0]).stdout
    outbox = cluster.cli_json("webhooks")
    assert outbox["counts"] == {"pending": 0, "failed": 0, "dead": 0}
