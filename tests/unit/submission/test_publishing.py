"""``publish_all`` with a publisher that takes batches: batches first, one by one on failure."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.queues import QUEUE_SMALL, BatchPublisher, JobMessage, RecordingPublisher
from pipeline.submission.publishing import BATCH_MESSAGES, BROKER_DOWN_AFTER, publish_all


@dataclass
class Batching(RecordingPublisher):
    """Records batches and single publishes; the batches numbered in ``fail_batches`` raise,
    and with ``down`` every single publish raises too."""

    batches: list[int] = field(default_factory=list)
    fail_batches: set[int] = field(default_factory=set)
    down: bool = False

    def publish(self, message: JobMessage) -> None:
        if self.down:
            raise ConnectionError("broker down")
        super().publish(message)

    def publish_batch(self, messages: Sequence[JobMessage]) -> None:
        self.batches.append(len(messages))
        if len(self.batches) in self.fail_batches:
            raise ConnectionError("pipeline broke")
        self.messages.extend(messages)


def _messages(count: int) -> list[JobMessage]:
    return [JobMessage(uuid.uuid4(), QUEUE_SMALL) for _ in range(count)]


def test_messages_go_in_batches() -> None:
    publisher, messages = Batching(), _messages(BATCH_MESSAGES * 2 + 1)
    assert isinstance(publisher, BatchPublisher)
    report = publish_all(publisher, messages)
    assert publisher.batches == [BATCH_MESSAGES, BATCH_MESSAGES, 1]
    assert report.published == [m.job_id for m in messages] and report.failed == {}
    assert publisher.messages == messages


def test_a_failed_batch_is_published_one_by_one_and_batches_resume() -> None:
    publisher, messages = Batching(fail_batches={1}), _messages(BATCH_MESSAGES + 5)
    report = publish_all(publisher, messages)
    assert publisher.batches == [BATCH_MESSAGES, 5]  # the second batch went as a batch again
    assert report.published == [m.job_id for m in messages] and report.failed == {}


def test_a_broker_that_is_down_is_tried_only_a_few_times() -> None:
    publisher = Batching(fail_batches={1, 2, 3}, down=True)
    messages = _messages(BATCH_MESSAGES * 2)
    report = publish_all(publisher, messages)
    assert publisher.batches == [BATCH_MESSAGES]  # no batch after the broker was found down
    assert report.published == [] and set(report.failed) == {m.job_id for m in messages}
    tried = [why for why in report.failed.values() if not why.startswith("not tried")]
    assert len(tried) == BROKER_DOWN_AFTER


def test_a_publisher_without_batches_publishes_each_message() -> None:
    publisher, messages = RecordingPublisher(), _messages(3)
    assert not isinstance(publisher, BatchPublisher)
    assert publish_all(publisher, messages).published == [m.job_id for m in messages]
    assert publisher.messages == messages
