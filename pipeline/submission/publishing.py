"""Publishing a submission's messages: every one tried, a broker that is down noticed.

The messages and the port they go through are :mod:`pipeline.queues`'s; this module is the
policy of handing many of them over (batches, one by one after a failed batch, giving up after
failures in a row) and the report of what was taken. What was not taken stays queued in
PostgreSQL for the reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from pipeline.queues import BatchPublisher, JobMessage, Publisher

log = logging.getLogger("doclane.publishing")


@dataclass(slots=True)
class PublishReport:
    """What a batch publish achieved, by job (a message's fate is that of every job it covers);
    the failures stay queued for the reconciler."""

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
                report.published.extend(j for message in batch for j in message.jobs)
                continue
        in_a_row = _publish_each(publisher, batch, report, in_a_row)
    return report


def _publish_each(
    publisher: Publisher, messages: Sequence[JobMessage], report: PublishReport, in_a_row: int
) -> int:
    """Publish one by one into ``report``; returns the failures in a row at the end."""
    for message in messages:
        if in_a_row >= BROKER_DOWN_AFTER:
            report.failed.update(
                dict.fromkeys(message.jobs, "not tried: the broker refused the messages before it")
            )
            continue
        try:
            publisher.publish(message)
        except Exception as exc:  # any broker trouble: the reconciler will publish it later
            in_a_row += 1
            report.failed.update(dict.fromkeys(message.jobs, f"{type(exc).__name__}: {exc}"))
        else:
            in_a_row = 0
            report.published.extend(message.jobs)
    return in_a_row
