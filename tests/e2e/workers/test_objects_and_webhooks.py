"""Object storage and completion webhooks together, as an operator runs them: ``doclane submit
s3://bucket/in/ --webhook URL --wait`` through real workers with the result store in the same
bucket, a receiver that verifies every event with Standard Webhooks' own library and is down
for each event's first tries, then retention expiring the old results and nothing else."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg

from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.object_store import ObjectServer
from tests.fixtures.samples import write_mixed, write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.webhook_receiver import WEBHOOK_TIMINGS, WebhookReceiver
from tests.fixtures.workers import Cluster

#: Each event is refused this often before the receiver takes it: a receiver that is down.
REFUSALS_PER_EVENT = 2


def test_a_prefix_with_a_webhook_is_converted_into_the_bucket_told_once_and_expired_by_age(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    object_server: ObjectServer,
    webhook_receiver: WebhookReceiver,
    tmp_path: Path,
) -> None:
    bucket = object_server.new_bucket()
    client = object_server.client()
    documents = write_mixed(tmp_path / "docs", 4)
    for path in documents:
        client.put_object(Bucket=bucket, Key=f"in/{path.name}", Body=path.read_bytes())
    cluster = make_cluster(
        redis_broker,
        fake_server.url,
        DOCLANE_RESULT_STORE=f"s3://{bucket}/results",
        DOCLANE_WEBHOOK_SECRET=webhook_receiver.secret,
        **WEBHOOK_TIMINGS,
        **object_server.environment(),
    )
    cluster.start_worker(concurrency=2)
    webhook_receiver.refuse_each(REFUSALS_PER_EVENT)

    out = cluster.cli_json(
        "submit", f"s3://{bucket}/in/", "--webhook", webhook_receiver.url, "--wait"
    )

    assert out["ok"] is True, out
    jobs = {j["job_id"]: j for j in out["jobs"]}
    assert sorted(j["source"] for j in jobs.values()) == sorted(
        f"s3://{bucket}/in/{p.name}" for p in documents
    )
    assert {j["state"] for j in jobs.values()} == {"succeeded"}
    for job_id in jobs:
        [key] = _result_keys(client, bucket, f"results/{job_id}/")
        in_bucket = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert cluster.cli("result", job_id, "--format", "md").stdout.encode() == in_bucket

    wait_for(
        lambda: cluster.cli_json("webhooks")["counts"] == {"pending": 0, "failed": 0, "dead": 0},
        timeout=120,
        message="every event delivered",
    )
    requests = webhook_receiver.requests
    assert all(r.verify_error is None for r in requests), requests
    accepted = webhook_receiver.accepted
    assert sorted(r.event["data"]["job_id"] for r in accepted) == sorted(jobs)  # type: ignore[index]
    assert all(r.event["type"] == "job.succeeded" for r in accepted)  # type: ignore[index]
    assert set(Counter(r.event_id for r in accepted).values()) == {1}  # each id taken once
    refused = Counter(r.event_id for r in requests if r.status == 503)
    assert refused == {r.event_id: REFUSALS_PER_EVENT for r in accepted}  # retried, same ids

    young_doc = write_sample(tmp_path / "young", "md", 9)
    client.put_object(Bucket=bucket, Key="later/young.md", Body=young_doc.read_bytes())
    [young] = cluster.cli_json("submit", f"s3://{bucket}/later/young.md", "--wait")["jobs"]
    assert young["state"] == "succeeded", young
    _age_results(cluster.env["DOCLANE_DATABASE_URL"], list(jobs), hours=2)

    expired = cluster.reconcile(DOCLANE_RESULT_RETENTION="1h")

    assert sorted(e["job_id"] for e in expired) == sorted(jobs)  # type: ignore[index]
    [kept] = _result_keys(client, bucket, "results/")  # the old objects gone, the young kept
    assert kept.startswith(f"results/{young['job_id']}/")
    for job_id in jobs:
        gone = cluster.cli_json("result", job_id, check=False)
        assert gone["error"]["code"] == "E113", gone  # expired, said with its code
        assert cluster.cli_json("status", job_id)["job"]["state"] == "succeeded"
    young_result = cluster.cli("result", young["job_id"], "--format", "md").stdout
    assert young_result.encode() == client.get_object(Bucket=bucket, Key=kept)["Body"].read()
    assert [r.event_id for r in webhook_receiver.accepted] == [r.event_id for r in accepted]


def _result_keys(client: object, bucket: str, prefix: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix)  # type: ignore[attr-defined]
    return sorted(o["Key"] for o in listed.get("Contents", []))


def _age_results(database_url: str, job_ids: list[str], *, hours: int) -> None:
    """Make these jobs' results ``hours`` old, as if converted then: retention is judged by
    age, and a test does not wait hours (nor depends on how fast the clock moved). Results are
    immutable to doclane, so the rewrite runs with triggers off, as history is loaded."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            "UPDATE results SET created_at = created_at - make_interval(hours => %s)"
            " WHERE job_id = ANY(%s::uuid[])",
            (hours, job_ids),
        )
