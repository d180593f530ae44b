"""Bells a broker lost (a flushed queue, a restart without persistence) cost one reconcile
pass: it rings every queue with claimable work and no bell waiting, once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.jobs.request import SubmissionRequest
from pipeline.queues import QUEUE_SMALL, WAKE_BELLS
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from pipeline.submission.intake import enqueue
from tests.fixtures.brokers import Broker
from tests.fixtures.samples import write_sample
from tests.support.brokers import small_queue_messages
from workers.app import create_app
from workers.publisher import CeleryPublisher


@pytest.fixture
def publisher(redis_broker: Broker) -> Iterator[CeleryPublisher]:
    app = create_app(read_settings(worker=dict(broker_url=redis_broker.url)))
    yield CeleryPublisher(app)
    app.close()


def test_a_flushed_queue_is_rung_again_by_the_next_pass_once(
    redis_broker: Broker, store: JobStore, publisher: CeleryPublisher, tmp_path: Path
) -> None:
    paths = [str(write_sample(tmp_path / "docs", "md", n)) for n in range(20)]
    enqueue(SubmissionRequest(paths), publisher=publisher, store=store)
    assert publisher.waiting(QUEUE_SMALL) == small_queue_messages(20)
    assert reconcile_once(store, publisher).rung == {}, "the bells are there"

    redis_broker.flush()  # FLUSHDB: what a Redis restarted without persistence also loses
    report = reconcile_once(store, publisher)

    assert report.rung == {QUEUE_SMALL: WAKE_BELLS}
    assert publisher.waiting(QUEUE_SMALL) == WAKE_BELLS
    assert reconcile_once(store, publisher).rung == {}, "rung once: its bells wait"
    assert publisher.waiting(QUEUE_SMALL) == WAKE_BELLS
