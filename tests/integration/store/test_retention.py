"""Retention (``DOCLANE_RESULT_RETENTION``): the reconciler's sweep deletes results older than
the cutoff, in bounded batches, and nothing younger; the job keeps its state and history, and
reading its result answers E113."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import psycopg
import pytest

from errors import ResultsExpired
from pipeline.jobs.model import EventKind, Job, JobState
from pipeline.objects.client import ObjectStore
from pipeline.settings.tree import read_settings
from pipeline.store.result_objects import ObjectResults
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.fixtures.object_store import ObjectServer
from tests.support.store_builders import job_in_state, new_job, sha256_of


def _now(raw_sql: psycopg.Connection) -> datetime:
    row = raw_sql.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def _succeeded(store: JobStore, **overrides: object) -> Job:
    return job_in_state(store, JobState.SUCCEEDED, **overrides)


def test_old_results_go_young_ones_stay_and_the_job_says_expired(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    old = _succeeded(store, formats=("md", "json"))
    cutoff = _now(raw_sql)
    young = _succeeded(store)

    expired = store.operations.expire_results(cutoff, limit=100)

    assert sorted(expired) == sorted([(old.id, "json"), (old.id, "md")])
    assert store.reads.list_results(old.id) == []
    assert [r.format for r in store.reads.list_results(young.id)] == ["md"]
    assert store.reads.get_result(young.id, "md") == "# result md"
    with pytest.raises(ResultsExpired) as gone:
        store.reads.get_result(old.id, "md")
    assert gone.value.code == "E113"
    after = store.reads.get_job(old.id)
    assert after is not None and after.state is JobState.SUCCEEDED
    notes = [e.detail for e in store.reads.events(old.id) if e.kind is EventKind.NOTE]
    assert {"note": "results expired", "formats": ["json", "md"]} in notes
    assert store.operations.expire_results(cutoff, limit=100) == []  # nothing twice


def test_the_sweep_takes_a_bounded_batch_oldest_first(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    jobs = [_succeeded(store) for _ in range(3)]
    cutoff = _now(raw_sql)

    first = store.operations.expire_results(cutoff, limit=2)
    second = store.operations.expire_results(cutoff, limit=2)

    assert first == [(jobs[0].id, "md"), (jobs[1].id, "md")]
    assert second == [(jobs[2].id, "md")]


def test_a_job_without_expired_results_still_answers_none(store: JobStore) -> None:
    job = job_in_state(store, JobState.QUEUED)
    assert store.reads.get_result(job.id, "md") is None


@pytest.fixture
def object_store(
    store_settings: StoreSettings, object_server: ObjectServer
) -> Iterator[tuple[JobStore, str]]:
    bucket = object_server.new_bucket()
    settings = store_settings.model_copy(update={"result_store": f"s3://{bucket}/r"})
    objects = ObjectResults(settings.result_store, ObjectStore(object_server.client()))
    store = JobStore(settings, result_objects=objects)
    yield store, bucket
    store.close()


def test_expired_objects_are_deleted_from_the_bucket(
    object_store: tuple[JobStore, str], object_server: ObjectServer, raw_sql: psycopg.Connection
) -> None:
    store, bucket = object_store
    old = _succeeded(store)
    cutoff = _now(raw_sql)
    young = _succeeded(store)

    assert store.operations.expire_results(cutoff, limit=100) == [(old.id, "md")]

    keys = [o["Key"] for o in object_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [f"r/{young.id}/{young.attempt}/md"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("2w", timedelta(weeks=2)),
        ("", None),
        ("off", None),
    ],
)
def test_the_retention_is_a_duration(text: str, expected: timedelta | None) -> None:
    assert (
        read_settings(reconcile=dict(result_retention=text)).reconcile.result_retention == expected
    )


def test_a_retention_that_is_no_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        _ = read_settings(reconcile=dict(result_retention="thirty days")).reconcile


def test_a_job_whose_results_expired_is_no_dedup_candidate(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    digest = sha256_of("the same document")
    old = _succeeded(store, content_sha256=digest)
    assert (
        store.submissions.create(new_job(content_sha256=digest)).job_id == old.id
    )  # dedup, before
    store.operations.expire_results(_now(raw_sql), limit=100)

    made = store.submissions.create(new_job(content_sha256=digest))

    assert not made.deduplicated and made.job_id != old.id
