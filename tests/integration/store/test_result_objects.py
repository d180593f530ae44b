"""``DOCLANE_RESULT_STORE=s3://...``: results as objects in a real S3-compatible server
(SeaweedFS), their address, size and hash in PostgreSQL; the orphan sweep; a server that
stops in the middle of an upload."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import BinaryIO

import psycopg
import pytest

from errors import ResultStoreUnavailable
from pipeline.jobs.model import Job, JobState
from pipeline.objects.client import ObjectStore
from pipeline.queues import RecordingPublisher
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import read_settings
from pipeline.store.result_objects import ObjectResults
from pipeline.store.rows import AttemptResults
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.fixtures.object_store import ObjectServer
from tests.support.store_builders import job_in_state

MIB = 1024 * 1024


def _keys(server: ObjectServer, bucket: str) -> list[str]:
    reply = server.client().list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in reply.get("Contents", []))


@pytest.fixture
def bucket(object_server: ObjectServer) -> str:
    return object_server.new_bucket()


@pytest.fixture
def object_store(
    store_settings: StoreSettings, object_server: ObjectServer, bucket: str
) -> Iterator[JobStore]:
    """A job store whose results go to ``s3://<bucket>/results``, with small multipart parts."""
    settings = store_settings.model_copy(update={"result_store": f"s3://{bucket}/results"})
    objects = ObjectStore(object_server.client(), multipart_bytes=5 * MIB)
    store = JobStore(settings, result_objects=ObjectResults(settings.result_store, objects))
    yield store
    store.close()


def _running(store: JobStore, **overrides: object) -> Job:
    return job_in_state(store, JobState.RUNNING, **overrides)


def test_results_are_objects_and_postgres_keeps_their_key_size_and_hash(
    object_store: JobStore, object_server: ObjectServer, bucket: str, raw_sql: psycopg.Connection
) -> None:
    job = _running(object_store, formats=("md", "json"))
    results = {"md": "# Titre é\n", "json": '{"a": 1}'}

    assert object_store.attempts.finish(job.id, job.attempt, results)

    assert _keys(object_server, bucket) == [
        f"results/{job.id}/{job.attempt}/json",
        f"results/{job.id}/{job.attempt}/md",
    ]
    row = raw_sql.execute(
        "SELECT content, object_uri, object_size, object_sha256 FROM results "
        "WHERE job_id = %s AND format = 'md'",
        (job.id,),
    ).fetchone()
    md = results["md"].encode()
    assert row == (
        None,
        f"s3://{bucket}/results/{job.id}/{job.attempt}/md",
        len(md),
        hashlib.sha256(md).hexdigest(),
    )
    assert object_store.reads.get_result(job.id, "md") == results["md"]
    out = io.BytesIO()
    assert object_store.reads.write_result(job.id, "json", out) == len(results["json"])
    assert out.getvalue() == results["json"].encode()
    assert {r.format: r.size_bytes for r in object_store.reads.list_results(job.id)} == {
        "md": len(md),
        "json": len(results["json"]),
    }


def test_a_large_result_goes_up_in_parts_and_comes_back_whole(
    object_store: JobStore, object_server: ObjectServer, bucket: str
) -> None:
    job = _running(object_store)
    content = "ligne é\n" * (12 * MIB // 9)

    assert object_store.attempts.finish(job.id, job.attempt, {"md": content})

    key = f"results/{job.id}/{job.attempt}/md"
    head = object_server.client().head_object(Bucket=bucket, Key=key)
    assert "-" in head["ETag"]  # a multipart object's ETag counts its parts
    out = io.BytesIO()
    assert object_store.reads.write_result(job.id, "md", out) == len(content.encode())
    assert out.getvalue() == content.encode()


def test_a_stale_attempt_commits_nothing_and_removes_its_objects(
    object_store: JobStore, object_server: ObjectServer, bucket: str
) -> None:
    job = _running(object_store)
    assert object_store.operations.cancel(job.id) is not None

    assert object_store.attempts.finish(job.id, job.attempt, {"md": "# late"}) is False

    assert _keys(object_server, bucket) == []
    assert object_store.reads.list_results(job.id) == []


def test_the_orphan_sweep_deletes_what_no_row_names_and_nothing_else(
    object_store: JobStore, object_server: ObjectServer, bucket: str
) -> None:
    kept = _running(object_store)
    assert object_store.attempts.finish(kept.id, kept.attempt, {"md": "# kept"})
    # What a worker killed between its upload and its commit leaves behind:
    killed = _running(object_store)
    objects = object_store.pool.result_objects
    assert objects is not None
    objects.put(killed.id, killed.attempt, {"md": "# never committed"})
    orphan = f"results/{killed.id}/{killed.attempt}/md"
    # Other objects under the prefix are not results: never the sweep's to delete.
    object_server.client().put_object(Bucket=bucket, Key="results/in/source.md", Body=b"# s")

    young = object_store.operations.sweep_result_orphans(min_age=timedelta(hours=1), limit=100)
    swept = object_store.operations.sweep_result_orphans(min_age=timedelta(0), limit=100)

    assert young == []
    assert swept == [f"s3://{bucket}/{orphan}"]
    assert _keys(object_server, bucket) == [
        f"results/{kept.id}/{kept.attempt}/md",
        "results/in/source.md",
    ]
    assert object_store.reads.get_result(kept.id, "md") == "# kept"


def test_the_orphan_sweep_lists_a_bounded_page_per_pass(
    object_store: JobStore, object_server: ObjectServer, bucket: str
) -> None:
    objects = object_store.pool.result_objects
    assert objects is not None
    for _ in range(3):
        job = _running(object_store)
        objects.put(job.id, job.attempt, {"md": "# orphan"})

    passes = [
        object_store.operations.sweep_result_orphans(min_age=timedelta(0), limit=2)
        for _ in range(3)
    ]

    assert [len(p) for p in passes] == [2, 1, 0]
    assert _keys(object_server, bucket) == []


def test_a_server_stopped_mid_upload_leaves_the_job_running_without_results(
    store_settings: StoreSettings,
    private_object_server: ObjectServer,
) -> None:
    server = private_object_server
    bucket = server.new_bucket()
    settings = store_settings.model_copy(update={"result_store": f"s3://{bucket}/r"})
    objects = ObjectStore(server.client(), multipart_bytes=5 * MIB)
    store = JobStore(settings, result_objects=ObjectResults(settings.result_store, objects))
    try:
        job = _running(store)
        stop_after_first_part = _StopAfter(server, reads=2)
        objects.upload = stop_after_first_part.wrap(objects.upload)  # type: ignore[method-assign]

        with pytest.raises(ResultStoreUnavailable) as failed:
            store.attempts.finish(job.id, job.attempt, {"md": "x" * (12 * MIB)})

        assert failed.value.retryable
        assert failed.value.code == "E402"
        after = store.reads.get_job(job.id)
        assert after is not None and after.state is JobState.RUNNING
        assert store.reads.list_results(job.id) == []
    finally:
        store.close()


class _StopAfter:
    """Stops the server once the upload has read ``reads`` pieces of its body: the server goes
    away in the middle of a multipart upload, as a crash would take it."""

    def __init__(self, server: ObjectServer, *, reads: int) -> None:
        self.server = server
        self.reads = reads

    def wrap(self, upload: Callable[..., None]) -> Callable[..., None]:
        def stopping(address: object, data: BinaryIO) -> None:
            upload(address, _Reading(data, self.reads, self.server.stop))

        return stopping


class _Reading:
    def __init__(self, data: BinaryIO, reads: int, then: Callable[[], None]) -> None:
        self.data, self.reads, self.then = data, reads, then

    def read(self, size: int = -1) -> bytes:
        self.reads -= 1
        if self.reads == 0:
            self.then()
        return self.data.read(size)


def test_a_reconciler_pass_removes_the_orphan_of_a_worker_killed_before_its_commit(
    object_store: JobStore, object_server: ObjectServer, bucket: str
) -> None:
    """Upload done, commit never made (the worker died): the job goes back to the queue with
    its lease, and the pass deletes the objects its dead attempt left."""
    job = _running(object_store)
    objects = object_store.pool.result_objects
    assert objects is not None
    objects.put(job.id, job.attempt, {"md": "# uploaded, then killed"})
    settings = read_settings(reconcile=dict(reconcile_orphan_min_age_s=0)).reconcile

    report = reconcile_once(object_store, RecordingPublisher(), settings)

    assert report.orphans == [f"s3://{bucket}/results/{job.id}/{job.attempt}/md"]
    assert _keys(object_server, bucket) == []
    assert object_store.reads.list_results(job.id) == []
    assert report.to_dict()["orphan_objects"] == report.orphans


def test_a_pass_goes_on_when_the_result_store_is_down(
    store_settings: StoreSettings, private_object_server: ObjectServer
) -> None:
    bucket = private_object_server.new_bucket()
    settings = store_settings.model_copy(update={"result_store": f"s3://{bucket}/r"})
    objects = ObjectResults(settings.result_store, ObjectStore(private_object_server.client()))
    store = JobStore(settings, result_objects=objects)
    try:
        private_object_server.stop()
        report = reconcile_once(store, RecordingPublisher(), read_settings().reconcile)
        assert report.orphans == [] and report.requeued == []
    finally:
        store.close()


def test_a_rounds_results_go_to_the_object_store_too(
    object_store: JobStore, object_server: ObjectServer, bucket: str, raw_sql: psycopg.Connection
) -> None:
    """A round stores its jobs' results together: with objects, each job's go to the bucket
    (never into PostgreSQL's rows), committed after its own uploads."""
    jobs = [_running(object_store, formats=("md",)) for _ in range(3)]
    ends = [AttemptResults(job.id, job.attempt, {"md": f"# {n}\n"}) for n, job in enumerate(jobs)]

    assert object_store.attempts.finish_together(ends) == [True, True, True]

    assert _keys(object_server, bucket) == sorted(
        f"results/{job.id}/{job.attempt}/md" for job in jobs
    )
    rows = raw_sql.execute(
        "SELECT count(*) FILTER (WHERE content IS NULL AND object_uri IS NOT NULL), count(*) "
        "FROM results WHERE job_id = ANY(%s)",
        ([job.id for job in jobs],),
    ).fetchone()
    assert rows == (3, 3)
    assert [object_store.reads.get_result(job.id, "md") for job in jobs] == [
        "# 0\n",
        "# 1\n",
        "# 2\n",
    ]
