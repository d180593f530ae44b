"""What the reconciler reads from the broker: how many messages wait in a queue."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pipeline.queues import QUEUE_MEDIUM, QUEUE_SMALL, JobMessage
from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from workers.app import create_app
from workers.publisher import CeleryPublisher
from workers.settings import load_worker_settings


@pytest.fixture
def publisher(any_broker: Broker) -> Iterator[CeleryPublisher]:
    app = create_app(load_worker_settings(broker_url=any_broker.url))
    yield CeleryPublisher(app)
    app.close()


def test_waiting_counts_every_priority_level_and_an_unknown_queue_holds_nothing(
    publisher: CeleryPublisher,
) -> None:
    assert publisher.waiting("doclane.never-declared") == 0
    for priority in (0, 4, 9, 100):
        publisher.publish(JobMessage(uuid.uuid4(), QUEUE_SMALL, priority=priority))

    # An AMQP publish is not a round trip: the broker counts the messages a moment later.
    wait_for(lambda: publisher.waiting(QUEUE_SMALL) == 4, timeout=30, message="4 waiting")
    assert publisher.waiting(QUEUE_MEDIUM) == 0


def test_an_unreachable_broker_cannot_say() -> None:
    app = create_app(load_worker_settings(broker_url="redis://127.0.0.1:1/0"))
    app.conf.broker_connection_timeout = 0.5
    try:
        assert CeleryPublisher(app).waiting(QUEUE_SMALL) is None
    finally:
        app.close()
