"""Publishing many messages at once: one kombu batch (one Redis pipeline), every message whole."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import signals

from pipeline.queues import JOB_QUEUES, QUEUE_LARGE, QUEUE_MEDIUM, QUEUE_SMALL, JobMessage
from pipeline.settings import read_settings
from pipeline.submission.publishing import BATCH_MESSAGES, BROKER_DOWN_AFTER, publish_all
from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from workers.app import create_app
from workers.publisher import CeleryPublisher, KombuMessages


@pytest.fixture
def publisher(any_broker: Broker) -> Iterator[CeleryPublisher]:
    app = create_app(read_settings(worker=dict(broker_url=any_broker.url)))
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
    app = create_app(read_settings(worker=dict(broker_url="redis://127.0.0.1:1/0")))
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


def _drain(publisher: CeleryPublisher) -> dict[str, dict[str, Any]]:
    """Every waiting message of the job queues, by task id, as a worker's kombu receives it:
    body bytes, headers, properties and delivery info (without the per-publish delivery tag)."""
    taken: dict[str, dict[str, Any]] = {}
    with publisher.app.connection_for_read() as conn:
        channel = conn.default_channel
        for name in JOB_QUEUES:
            queue = publisher.app.amqp.queues[name].bind(channel)
            queue.declare()
            while (message := queue.get(no_ack=True)) is not None:
                properties = {k: v for k, v in message.properties.items() if k != "delivery_tag"}
                info = {k: v for k, v in message.delivery_info.items() if k != "delivery_tag"}
                taken[message.headers["id"]] = {
                    "queue": name,
                    "body": message.body,
                    "content_type": message.content_type,
                    "content_encoding": message.content_encoding,
                    "headers": message.headers,
                    "properties": properties,
                    "delivery_info": info,
                }
    return taken


def test_a_batched_message_is_the_one_send_task_makes(publisher: CeleryPublisher) -> None:
    """Batches build their messages without ``send_task``: workers must see no difference."""
    assert KombuMessages.usable(publisher.app)
    messages = [
        JobMessage(uuid.uuid4(), queue, priority=priority)
        for queue in (QUEUE_SMALL, QUEUE_MEDIUM, QUEUE_LARGE)
        for priority in (-1, 0, 4, 9, 100)
    ]
    for message in messages:
        publisher.publish(message)
    one_by_one = _drain(publisher)
    publisher.publish_batch(messages)
    batched = _drain(publisher)
    assert set(one_by_one) == {str(message.job_id) for message in messages}
    for message in messages:
        assert batched[str(message.job_id)] == one_by_one[str(message.job_id)]


def test_publish_signals_keep_their_messages_going_through_send_task(
    publisher: CeleryPublisher,
) -> None:
    seen: list[str] = []

    def published(sender: str, headers: dict[str, Any], **_: Any) -> None:
        seen.append(headers["id"])

    signals.after_task_publish.connect(published, weak=False)
    try:
        assert not KombuMessages.usable(publisher.app)
        messages = [JobMessage(uuid.uuid4(), QUEUE_SMALL) for _ in range(3)]
        publisher.publish_batch(messages)
    finally:
        signals.after_task_publish.disconnect(published)
    assert seen == [str(message.job_id) for message in messages]
    assert set(_drain(publisher)) == set(seen)


def test_inside_a_running_task_messages_still_name_it_their_parent(
    publisher: CeleryPublisher,
) -> None:
    """The reconciler publishes from inside its task: send_task then sets parent and root."""
    messages = [JobMessage(uuid.uuid4(), QUEUE_MEDIUM, priority=3) for _ in range(2)]
    usable: list[bool] = []

    @publisher.app.task(shared=False, name="doclane.test.publish_inside")
    def publish_inside(batch: bool) -> None:
        usable.append(KombuMessages.usable(publisher.app))
        if batch:
            publisher.publish_batch(messages)
        else:
            for message in messages:
                publisher.publish(message)

    parent = str(uuid.uuid4())
    publish_inside.apply(args=(False,), task_id=parent)
    one_by_one = _drain(publisher)
    publish_inside.apply(args=(True,), task_id=parent)
    batched = _drain(publisher)
    assert batched == one_by_one
    assert {m["headers"]["parent_id"] for m in batched.values()} == {parent}
    assert usable == [False, False]
