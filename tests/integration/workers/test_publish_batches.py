"""Publishing many messages at once: one kombu batch (one Redis pipeline), every message whole."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pipeline.publishing import (
    BATCH_MESSAGES,
    BROKER_DOWN_AFTER,
    QUEUE_MEDIUM,
    QUEUE_SMALL,
    JobMessage,
    publish_all,
)
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


def test_every_message_of_several_batches_reaches_its_queue(publisher: CeleryPublisher) -> None:
    count = 2 * BATCH_MESSAGES + 7
    messages = [
        JobMessage(uuid.uuid4(), QUEUE_SMALL if n % 3 else QUEUE_MEDIUM, priority=n % 11)
        for n in range(count)
    ]
    report = publish_all(publisher, messages)
    assert report.failed == {}
    assert report.published == [message.job_id for message in messages]
    medium = sum(1 for message in messages if message.queue == QUEUE_MEDIUM)
    wait_for(
        lambda: (
            (publisher.waiting(QUEUE_SMALL), publisher.waiting(QUEUE_MEDIUM))
            == (count - medium, medium)
        ),
        timeout=30,
        message="every message waiting in its queue",
    )


def test_an_unreachable_broker_fails_every_message_after_a_few_tries() -> None:
    app = create_app(load_worker_settings(broker_url="redis://127.0.0.1:1/0"))
    app.conf.broker_connection_timeout = 0.5
    publisher = CeleryPublisher(app)
    messages = [JobMessage(uuid.uuid4(), QUEUE_SMALL) for _ in range(BATCH_MESSAGES + 3)]
    try:
        report = publish_all(publisher, messages)
    finally:
        app.close()
    assert report.published == []
    assert set(report.failed) == {message.job_id for message in messages}
    not_tried = [why for why in report.failed.values() if why.startswith("not tried")]
    assert len(not_tried) == len(messages) - BROKER_DOWN_AFTER
