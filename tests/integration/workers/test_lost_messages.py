"""Messages a broker lost (a flushed queue, a restart without persistence) are noticed by the
reconciler's count of the queue against the database's queued jobs, and republished well before
the stale threshold; messages still in the queue are not republished."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs import SubmissionRequest
from pipeline.queues import QUEUE_SMALL
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings import read_settings
from pipeline.store import JobStore
from pipeline.submission import enqueue
from tests.fixtures.brokers import Broker
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.brokers import small_queue_messages
from workers.app import create_app
from workers.publisher import CeleryPublisher

#: The stale sweep never runs in these tests: what is republished is the lost-message sweep's.
SETTINGS = read_settings(
    reconcile=dict(reconcile_stale_after_s=3600, reconcile_lost_after_s=0.05)
).reconcile


@pytest.fixture
def publisher(redis_broker: Broker) -> Iterator[CeleryPublisher]:
    app = create_app(read_settings(worker=dict(broker_url=redis_broker.url)))
    yield CeleryPublisher(app)
    app.close()


def submitted(store: JobStore, publisher: CeleryPublisher, folder: Path, count: int) -> list[UUID]:
    """``count`` small jobs, their messages counted in the broker, their rows past the
    lost-message threshold."""
    paths = [str(write_sample(folder, "md", n)) for n in range(count)]
    ids = enqueue(SubmissionRequest(paths), publisher=publisher, store=store).job_ids
    assert publisher.waiting(QUEUE_SMALL) == small_queue_messages(count)

    def past_threshold() -> bool:
        newest = max(job.updated_at for job in store.reads.get_jobs(ids))
        return (datetime.now(UTC) - newest).total_seconds() > 0.2

    wait_for(past_threshold, timeout=10, message="the rows to be past the threshold")
    return ids


def test_a_flushed_queue_is_republished_before_the_stale_threshold(
    redis_broker: Broker, store: JobStore, publisher: CeleryPublisher, tmp_path: Path
) -> None:
    ids = submitted(store, publisher, tmp_path / "docs", 20)  # three messages: 8, 8 and 4

    untouched = reconcile_once(store, publisher, SETTINGS)
    assert untouched.lost == [] and untouched.republished == [], "every message was there"

    redis_broker.flush()  # FLUSHDB: what a Redis restarted without persistence also loses
    report = reconcile_once(store, publisher, SETTINGS)

    assert sorted(report.lost) == sorted(ids) and sorted(report.republished) == sorted(ids)
    assert publisher.waiting(QUEUE_SMALL) == small_queue_messages(20), "republished"
    again = reconcile_once(store, publisher, SETTINGS)
    assert again.lost == [] and again.republished == [], "each lost message replaced once"
    assert publisher.waiting(QUEUE_SMALL) == small_queue_messages(20)
