"""The Celery implementation of ``pipeline.queues.Publisher``.

The task id is the job id. A job's messages (first publish, Celery retries, the reconciler's
republishes) all carry it, so every Celery log line about a job names it. Nothing is ever
revoked: cancelling is a change of the job's row, which a waiting message finds when it claims
and a running attempt finds at its next lease renewal.

Priorities: a job's ``priority`` (any int, higher runs first) becomes one of ten broker levels
(``pipeline.queues.clamp_priority``, mapped per transport by :func:`broker_priority`). The broker
orders waiting messages by level, FIFO within a level; a message already taken by a worker is
never overtaken. The two transports count in opposite directions, so the level is mapped per
transport (:func:`uses_redis_transport`); ``workers.app`` configures both to honour it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import Celery, signals
from celery.utils.nodenames import anon_nodename
from kombu.entity import Queue

from pipeline.queues import JobMessage, clamp_priority
from workers.broker import MAX_BROKER_PRIORITY, uses_redis_transport, waiting_in
from workers.settings import TimeLimits, settings_of

CONVERT_TASK = "doclane.convert"
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


class KombuMessages:
    """``doclane.convert`` messages as ``send_task`` makes them, a few microseconds each.

    Everything ``send_task`` works out per message apart from the job's id and priority is the
    same for every message of a queue: the route (doclane's queues are direct and reached
    through the nameless exchange, routing key = queue name), the tier's time limits, the
    serializer, the sender's name (``origin``) and reply address. They are worked out once
    here; each message is then Celery's own protocol message
    (``app.amqp.create_task_message``, with the repr of its one argument written directly,
    as ``saferepr`` writes it) plus the keyword arguments ``send_task`` hands to
    ``Producer.publish``.
    """

    def __init__(self, app: Celery, limits: TimeLimits) -> None:
        conf = app.conf
        self._create = app.amqp.create_task_message
        self._queues = app.amqp.queues
        self._limits = limits
        self._redis = uses_redis_transport(conf.broker_url)
        self._origin = anon_nodename()
        self._reply_to = app.thread_oid
        self._serializer = conf.task_serializer
        self._compression = conf.task_compression
        self._delivery_mode = conf.task_default_delivery_mode
        self._routes: dict[str, tuple[Queue, float, float]] = {}

    @staticmethod
    def usable(app: Celery) -> bool:
        """Whether a message built here is all that ``send_task`` would do for it: not when
        the app sends task-sent events, routes tasks by configuration or through exchanges
        other than direct ones, or somebody listens to Celery's publish signals (none of
        which doclane does), nor inside a running task (the reconciler's pass in a worker:
        ``send_task`` names that task the message's parent and root)."""
        return not (
            app.current_worker_task is not None
            or app.conf.task_send_sent_event
            or any(queue.exchange.type != "direct" for queue in app.amqp.queues.values())
            or app.conf.task_routes
            or signals.before_task_publish.receivers
            or signals.after_task_publish.receivers
            or signals.task_sent.receivers
        )

    def convert(self, message: JobMessage, *, declare: bool) -> tuple[Any, dict[str, Any]]:
        """The body and ``Producer.publish`` keyword arguments of ``message`` (no countdown);
        ``declare``: declare its queue first, as the first message of a batch on it does."""
        queue, soft, hard = self._route(message.queue)
        task_id = str(message.job_id)
        args = [task_id]
        headers, properties, body, _ = self._create(
            task_id,
            CONVERT_TASK,
            args,
            None,
            reply_to=self._reply_to,
            time_limit=hard,
            soft_time_limit=soft,
            ignore_result=None,  # what send_task passes for a task that does not set it
            argsrepr=repr(args),
            kwargsrepr="{}",
            origin=self._origin,
        )
        options = {
            "exchange": "",
            "routing_key": queue.name,
            "serializer": self._serializer,
            "compression": self._compression,
            "retry": False,
            "delivery_mode": queue.exchange.delivery_mode or self._delivery_mode,
            "declare": [queue] if declare else [],
            "headers": headers,
            "priority": broker_priority(message.priority, redis=self._redis),
            **properties,
        }
        return body, options

    def _route(self, name: str) -> tuple[Queue, float, float]:
        route = self._routes.get(name)
        if route is None:
            queue = self._queues[name]  # as send_task: a missing queue is made (and declared)
            soft, hard = self._limits.for_queue(name)
            route = self._routes[name] = (queue, soft, hard)
        return route


class CeleryPublisher:
    """Publishes ``doclane.convert(job_id)`` to the job's queue with its tier's time limits and
    its priority (mapped to the broker's scale by :func:`broker_priority`).

    Celery retries (``self.retry`` in the task) keep the priority: Celery re-sends a retry with
    the ``priority`` the message was delivered with, already on this transport's scale.
    """

    def __init__(self, app: Celery, limits: TimeLimits | None = None) -> None:
        self.app = app
        self.limits = limits or TimeLimits.from_settings(settings_of(app))

    def publish(self, message: JobMessage) -> None:
        self.app.send_task(CONVERT_TASK, args=[str(message.job_id)], **self._options(message))

    def publish_batch(self, messages: Sequence[JobMessage]) -> None:
        """Every message through one producer, in one kombu publish batch: on Redis one
        pipeline (one round trip) for them all, flushed when the batch ends, and raising if
        that fails; brokers without batches (AMQP) publish each at once, as before.

        Each message is built by :class:`KombuMessages` and handed to kombu's
        ``Producer.publish`` directly: ``send_task`` looked up the task, the route, the
        options and the retry policy again for every message and made a ``saferepr`` of its
        arguments, about 125 us a message, most of a 10,000-file submission's publishing time.
        The messages are the very ones ``send_task`` makes (``tests/integration/workers/
        test_publish_batches.py`` compares them on both brokers). A message with a countdown,
        or an app whose publishing somebody watches (sent events, publish signals), still goes
        through ``send_task``.

        Each queue is declared with its first message only (a declaration per message cost
        more than the publish), and nothing is retried here: buffering a message cannot fail
        for the broker's sake, and a failed batch is published again one by one by
        ``publish_all``, with the retry policy.
        """
        build = KombuMessages(self.app, self.limits) if KombuMessages.usable(self.app) else None
        declared: set[str] = set()
        with self.app.producer_or_acquire() as producer, producer.batch(2 * len(messages) + 1):
            for message in messages:
                declare = message.queue not in declared
                declared.add(message.queue)
                if build is not None and not message.countdown_s:
                    body, options = build.convert(message, declare=declare)
                    producer.publish(body, **options)
                    continue
                options = self._options(message)
                options["retry"] = False
                if not declare:
                    options["declare"] = []
                self.app.send_task(
                    CONVERT_TASK, args=[str(message.job_id)], producer=producer, **options
                )

    def _options(self, message: JobMessage) -> dict[str, Any]:
        soft, hard = self.limits.for_queue(message.queue)
        options: dict[str, Any] = {
            "queue": message.queue,
            "task_id": str(message.job_id),
            "soft_time_limit": soft,
            "time_limit": hard,
            "retry": True,
            "retry_policy": PUBLISH_RETRY_POLICY,
            "priority": broker_priority(
                message.priority, redis=uses_redis_transport(self.app.conf.broker_url)
            ),
        }
        if message.countdown_s:
            options["countdown"] = message.countdown_s
        return options

    def waiting(self, queue: str) -> int | None:
        """Messages waiting in ``queue`` (every priority level), by a passive declare.

        A queue the broker does not know holds nothing. None when the broker cannot be asked:
        the reconciler then judges by the database alone.
        """
        with self.app.connection_for_read() as conn:
            return waiting_in(conn, queue)
