"""Object storage end to end: ``doclane submit s3://bucket/in/ --wait`` through a real worker,
with the results stored in the bucket (``DOCLANE_RESULT_STORE``), then expired by retention.
The bucket is a real S3-compatible server (SeaweedFS)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from pipeline.jobs.model import JobState
from pipeline.settings.tree import read_settings
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.object_store import ObjectServer
from tests.fixtures.samples import write_mixed
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster


def test_submit_a_prefix_wait_and_read_results_from_the_bucket_until_they_expire(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    object_server: ObjectServer,
    tmp_path: Path,
) -> None:
    bucket = object_server.new_bucket()
    client = object_server.client()
    documents = write_mixed(tmp_path / "docs", 5)
    for path in documents:
        client.put_object(Bucket=bucket, Key=f"in/{path.name}", Body=path.read_bytes())
    client.put_object(Bucket=bucket, Key="elsewhere/x.md", Body=b"# not under the prefix")
    cluster = make_cluster(
        redis_broker,
        fake_server.url,
        DOCLANE_RESULT_STORE=f"s3://{bucket}/results",
        **object_server.environment(),
    )
    cluster.start_worker(concurrency=2)

    out = cluster.cli_json("submit", f"s3://{bucket}/in/", "--wait")

    assert out["ok"] is True, out
    jobs = out["jobs"]
    assert sorted(j["source"] for j in jobs) == sorted(
        f"s3://{bucket}/in/{p.name}" for p in documents
    )
    assert [j["state"] for j in jobs] == ["succeeded"] * len(documents)
    stored = client.list_objects_v2(Bucket=bucket, Prefix="results/")["Contents"]
    assert len(stored) == len(documents)  # one md object per job, in the bucket
    md_job = next(j for j in jobs if j["source"].endswith(".md"))
    printed = cluster.cli("result", md_job["job_id"], "--format", "md").stdout
    key = next(o["Key"] for o in stored if o["Key"].startswith(f"results/{md_job['job_id']}/"))
    in_bucket = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert printed.encode() == in_bucket and b"Notes" in in_bucket
    job = cluster.store.reads.get_job(md_job["job_id"])
    assert (
        job is not None
        and job.content_sha256
        == hashlib.sha256(
            (tmp_path / "docs" / Path(md_job["source"]).name).read_bytes()
        ).hexdigest()
    )

    again = cluster.cli_json("submit", f"s3://{bucket}/in/")
    assert all(a["deduplicated"] for a in again["accepted"]), again

    wait_for(
        lambda: cluster.reconcile(DOCLANE_RESULT_RETENTION="1s"),
        timeout=60,
        message="a reconciler pass that expires the results",
    )
    gone = cluster.cli_json("result", md_job["job_id"], check=False)
    assert gone["error"]["code"] == "E113", gone
    assert cluster.cli_json("status", md_job["job_id"])["job"]["state"] == "succeeded"
    left = client.list_objects_v2(Bucket=bucket, Prefix="results/").get("Contents", [])
    assert left == []  # every result was older than the retention: every object deleted


def test_a_result_store_that_is_down_retries_the_job_and_never_succeeds_it_without_results(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    private_object_server: ObjectServer,
    tmp_path: Path,
) -> None:
    server = private_object_server
    bucket = server.new_bucket()
    [document] = write_mixed(tmp_path / "docs", 1)
    cluster = make_cluster(
        redis_broker,
        fake_server.url,
        DOCLANE_RESULT_STORE=f"s3://{bucket}/results",
        **server.environment(),
    )
    server.stop()
    cluster.start_worker(concurrency=1)

    [job_id] = cluster.submit(
        [document], submit_settings=read_settings(submit=dict(max_attempts=50)).submit
    ).job_ids
    wait_for(
        lambda: any(e.error_code == "E402" for e in cluster.store.reads.events(job_id)),
        timeout=60,
        message="an attempt that met the stopped result store",
    )
    job = cluster.store.reads.get_job(job_id)
    assert job is not None and job.state is not JobState.SUCCEEDED
    assert cluster.store.reads.list_results(job_id) == []
    server.start()

    [done] = cluster.wait_terminal([job_id], timeout=120)

    assert done.state is JobState.SUCCEEDED, cluster.logs()
    keys = [o["Key"] for o in server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [f"results/{job_id}/{done.attempt}/md"]
    assert "Notes" in cluster.cli("result", str(job_id)).stdout
