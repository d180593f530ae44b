"""The publisher interface: how the library wakes a worker up without knowing Celery.

A message carries only a job id; PostgreSQL holds everything else. ``workers/`` implements
:class:`Publisher` with Celery and the CLI (the composition root) wires it in. A publisher may
fail (the broker is down): the job row is already committed, stays queued, and the reconciler
publishes it again later, so callers log the failure and carry on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from uuid import UUID

log = logging.getLogger("doclane.publishing")

#: The queues, by size tier, so that one 300-page document does not starve the small ones.
QUEUE_SMALL = "doclane.small"
QUEUE_MEDIUM = "doclane.medium"
QUEUE_LARGE = "doclane.large"
JOB_QUEUES: tuple[str, ...] = (QUEUE_SMALL, QUEUE_MEDIUM, QUEUE_LARGE)


@dataclass(frozen=True, slots=True)
class JobMessage:
    """A wake-up call for one job: which job, on which queue, how urgent (higher runs first),
    and (optionally) not before when."""

    job_id: UUID
    queue: str
    countdown_s: float | None = None
    priority: int = 0


class Publisher(Protocol):
    """Hands job ids to the broker."""

    def publish(self, message: JobMessage) -> None:
        """Publish one message; raise if the broker did not take it."""
        ...

    def waiting(self, queue: str) -> int | None:
        """How many messages wait in ``queue`` right now; None when the broker cannot say."""
        ...


@runtime_checkable
class BatchPublisher(Protocol):
    """A publisher that can hand many messages to the broker in one go (a Redis pipeline)."""

    def publish_batch(self, messages: Sequence[JobMessage]) -> None:
        """Publish every message, or raise: then any of them may or may not have been taken."""
        ...


@dataclass(slots=True)
class PublishReport:
    """What a batch publish achieved; the failures stay queued for the reconciler."""

    published: list[UUID] = field(default_factory=list)
    failed: dict[UUID, str] = field(default_factory=dict)


#: Consecutive publish failures after which the broker is taken to be down: the remaining
#: messages are not tried (each try can take seconds) and their jobs wait for the reconciler.
BROKER_DOWN_AFTER = 3


#: Messages per batch of a :class:`BatchPublisher` (one broker round trip each).
BATCH_MESSAGES = 500


def publish_all(publisher: Publisher, messages: Sequence[JobMessage]) -> PublishReport:
    """Publish every message; a failure does not stop the rest, a broker that is down does.

    A :class:`BatchPublisher` gets them in batches of ``BATCH_MESSAGES``: one round trip per
    batch instead of one per message (10,000 single publishes took seconds). A batch that fails
    is published again one message at a time, so each message's fate is known and a broker
    that is down is noticed as before; a message of a failed batch that did reach the broker
    is then there twice, which costs nothing (the second finds its job already claimed).
    """
    report = PublishReport()
    if not isinstance(publisher, BatchPublisher):
        _publish_each(publisher, messages, report, 0)
        return report
    in_a_row = 0
    for start in range(0, len(messages), BATCH_MESSAGES):
        batch = messages[start : start + BATCH_MESSAGES]
        if not report.failed:
            try:
                publisher.publish_batch(batch)
            except Exception as exc:  # any broker trouble: find out message by message
                log.info("a batch of %d message(s) failed (%s); one by one now", len(batch), exc)
            else:
                report.published.extend(message.job_id for message in batch)
                continue
        in_a_row = _publish_each(publisher, batch, report, in_a_row)
    return report


def _publish_each(
    publisher: Publisher, messages: Sequence[JobMessage], report: PublishReport, in_a_row: int
) -> int:
    """Publish one by one into ``report``; returns the failures in a row at the end."""
    for message in messages:
        if in_a_row >= BROKER_DOWN_AFTER:
            report.failed[message.job_id] = "not tried: the broker refused the messages before it"
            continue
        try:
            publisher.publish(message)
        except Exception as exc:  # any broker trouble: the reconciler will publish it later
            in_a_row += 1
            report.failed[message.job_id] = f"{type(exc).__name__}: {exc}"
        else:
            in_a_row = 0
            report.published.append(message.job_id)
    return in_a_row


@dataclass(slots=True)
class RecordingPublisher:
    """A publisher that only remembers what it was given (dry runs, the Python API's default)."""

    messages: list[JobMessage] = field(default_factory=list)
    #: What ``waiting`` answers per queue (absent: unknown).
    depths: dict[str, int] = field(default_factory=dict)

    def publish(self, message: JobMessage) -> None:
        self.messages.append(message)

    def waiting(self, queue: str) -> int | None:
        return self.depths.get(queue)
