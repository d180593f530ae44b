"""The Celery implementation of ``pipeline.queues.Publisher``.

A message is a bell, ``doclane.drain(queue)``: the pool process that takes it drains the queue
(:meth:`pipeline.processing.processor.JobProcessor.drain`). It names no job, so nothing is ever
revoked: cancelling is a change of the job's row, which a claim honours and a running attempt
finds at its next lease renewal.

Priorities: a bell's ``priority`` (its most urgent job's; any int, higher runs first) becomes
one of ten broker levels (``pipeline.queues.clamp_priority``, mapped per transport by
:func:`broker_priority`). The broker orders waiting bells by level, FIFO within a level; one
taken is never overtaken. The two transports count in opposite directions, so the level is
mapped per transport (:func:`uses_redis_transport`); ``workers.app`` configures both to honour it.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from pipeline.queues import Wakeup, clamp_priority
from workers.broker import MAX_BROKER_PRIORITY, uses_redis_transport, waiting_in
from workers.settings import TimeLimits, settings_of

DRAIN_TASK = "doclane.drain"
RECONCILE_TASK = "doclane.reconcile"
WEBHOOKS_TASK = "doclane.deliver_webhooks"

#: Publishing must not hang a submitter when the broker is down: a few quick tries, then the
#: job stays queued for the reconciler.
PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 1.0,
}


def broker_priority(priority: int, *, redis: bool) -> int:
    """The message priority for a job's ``priority`` (higher runs first) on this transport.

    The job's priority becomes its level (``pipeline.queues.clamp_priority``). AMQP's
    ``x-max-priority`` queues deliver a higher number first, so the level is sent as is; kombu's
    Redis transport keeps one list per level and pops level 0 first, so the level is reversed
    there (job priority 9 -> 0, job priority 0 -> 9).
    """
    level = clamp_priority(priority)
    return MAX_BROKER_PRIORITY - level if redis else level


class CeleryPublisher:
    """Rings ``doclane.drain(queue)`` with the queue's drain time limits and the bell's
    priority (mapped to the broker's scale by :func:`broker_priority`)."""

    def __init__(self, app: Celery, limits: TimeLimits | None = None) -> None:
        self.app = app
        self.limits = limits or TimeLimits.from_settings(settings_of(app))

    def publish(self, wakeup: Wakeup) -> None:
        self.app.send_task(DRAIN_TASK, args=[wakeup.queue], **self._options(wakeup))

    def _options(self, wakeup: Wakeup) -> dict[str, Any]:
        soft, hard = self.limits.for_drain(wakeup.queue)
        options: dict[str, Any] = {
            "queue": wakeup.queue,
            "soft_time_limit": soft,
            "time_limit": hard,
            "retry": True,
            "retry_policy": PUBLISH_RETRY_POLICY,
            "priority": broker_priority(
                wakeup.priority, redis=uses_redis_transport(self.app.conf.broker_url)
            ),
        }
        if wakeup.countdown_s:
            options["countdown"] = wakeup.countdown_s
        return options

    def waiting(self, queue: str) -> int | None:
        """Bells waiting in ``queue`` (every priority level), by a passive declare.

        A queue the broker does not know holds nothing. None when the broker cannot be asked:
        the reconciler then judges by the database alone.
        """
        with self.app.connection_for_read() as conn:
            return waiting_in(conn, queue)
