"""``publish_all`` with a publisher that takes batches: batches first, one by one on failure."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.queues import (
    QUEUE_MEDIUM,
    QUEUE_SMALL,
    BatchPublisher,
    JobMessage,
    RecordingPublisher,
    jobs_per_message,
    messages_for,
    passes_on,
)
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


def _jobs(count: int, queue: str, priority: int = 0) -> list[tuple[uuid.UUID, str, int]]:
    return [(uuid.uuid4(), queue, priority) for _ in range(count)]


def test_a_message_stands_for_up_to_a_rounds_worth_of_small_jobs_and_one_medium_job() -> None:
    """Grouped per queue and priority, in order, each message naming the first job it covers."""
    small, urgent, medium = _jobs(17, QUEUE_SMALL), _jobs(2, QUEUE_SMALL, 5), _jobs(2, QUEUE_MEDIUM)
    messages = messages_for([*small[:9], *urgent, *medium, *small[9:]])
    per = jobs_per_message(QUEUE_SMALL)
    assert per > 1 and jobs_per_message(QUEUE_MEDIUM) == 1
    ids = [job for job, _, _ in small]
    assert [m.jobs for m in messages if m.queue == QUEUE_SMALL and m.priority == 0] == [
        tuple(ids[i : i + per]) for i in range(0, 17, per)
    ]
    assert [(m.job_id, m.priority) for m in messages if m.priority == 5] == [(urgent[0][0], 5)]
    assert [m.jobs for m in messages if m.queue == QUEUE_MEDIUM] == [(j,) for j, _, _ in medium]
    assert all(m.job_id == m.jobs[0] for m in messages)


def test_what_a_publish_reports_of_a_message_it_reports_of_every_job_it_covers() -> None:
    messages = messages_for(_jobs(3 * jobs_per_message(QUEUE_SMALL), QUEUE_SMALL))
    publisher = Batching(fail_batches={1}, down=True)
    report = publish_all(publisher, messages[:1])
    assert report.published == [] and list(report.failed) == list(messages[0].jobs)
    report = publish_all(Batching(), messages)
    assert report.published == [job for m in messages for job in m.jobs]


def test_a_claim_passes_a_message_on_only_when_it_took_fewer_jobs_than_the_message_stood_for() -> (
    None
):
    per = jobs_per_message(QUEUE_SMALL)
    assert [passes_on(QUEUE_SMALL, n) for n in (0, 1, per - 1, per, per + 3)] == [
        False,
        True,
        True,
        False,
        False,
    ]
    assert not passes_on(QUEUE_MEDIUM, 1) and not passes_on(QUEUE_MEDIUM, 0)
