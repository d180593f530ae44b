"""The Celery app: reliability settings, the tasks, and the per-process lifecycle.

A job message is a bell, ``doclane.drain(queue)``: PostgreSQL is the queue, and the pool
process that takes a bell drains it in fair order (:mod:`pipeline.processing.processor`).

Reliability, in Celery's terms:

- ``task_acks_late`` + ``task_reject_on_worker_lost``: a bell is acknowledged only after its
  drain ended, and a worker process that dies mid-job (kill -9, OOM) gives its bell back (the
  job it held comes back when its lease lapses);
- ``worker_prefetch_multiplier = 1``: a worker holds one message per process, no hoard;
- soft/hard time limits per message, from the job's size tier (the publisher sets them);
- on Redis, no acknowledgement emulation (``DOCLANE_REDIS_ACK_EMULATION``): kombu copies every
  delivered message into a hash and deletes it on ack, two round trips per job (a
  tenth of a worker's CPU against a fast server), to bring back, hours later, what a dead worker
  held; the reconciler brings those jobs back from the database within a lease or a stale
  sweep. With it on, the visibility timeout is set above the longest hard limit plus the
  longest countdown, so Redis never redelivers a message that is merely running or waiting;
- one store and one MCP pool per worker process (``worker_process_init``/``_shutdown``);
- message priorities (``workers.publisher.broker_priority``): ten levels on both brokers, Redis
  through one list per level, RabbitMQ through job queues declared with ``x-max-priority``.

None of this is what keeps jobs safe, though: the database does (guarded claims, fenced
writes), and the reconciler replaces whatever messages the broker loses.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, signals
from kombu.entity import Exchange, Queue

from pipeline.queues import CONTROL_QUEUE, JOB_QUEUES, QUEUE_SMALL
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import Settings, read_settings
from pipeline.support.logs import configure_logging
from workers import runtime
from workers.broker import MAX_BROKER_PRIORITY, redis_transport_options, uses_redis_transport
from workers.publisher import DRAIN_TASK, RECONCILE_TASK, WEBHOOKS_TASK
from workers.settings import SETTINGS_KEY, TimeLimits

log = logging.getLogger("doclane.worker")

#: Celery's loggers of a line per task received and per task ended.
CELERY_PER_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")


def create_app(settings: Settings | None = None) -> Celery:
    """A configured Celery app with doclane's tasks registered (no connection is made).

    ``settings`` (by default, the environment's) is the worker process's settings tree: the
    app carries it (:func:`workers.settings.settings_of`) to the parts that the worker starts.
    """
    tree = settings or read_settings()
    cfg = tree.worker
    limits = TimeLimits.from_settings(tree)
    reconcile = tree.reconcile
    webhook_poll_s = tree.webhooks.webhook_poll_s
    app = Celery("doclane", set_as_current=False)
    app.conf[SETTINGS_KEY] = tree
    redis = uses_redis_transport(cfg.broker_url)
    transport_options: dict[str, Any] = {"visibility_timeout": limits.visibility_timeout()}
    job_queue_arguments: dict[str, Any] | None = None
    if redis:
        transport_options.update(
            redis_transport_options(),  # one Redis list per priority level, socket deadlines
            # Kombu's BRPOP names every queue's level-0 list, then every level-1 list, ...: the
            # priority holds across queues whatever the order strategy. "priority" would only
            # fix the order of queues within a level (small before medium before large before
            # control), starving the large tier behind a stream of small jobs; round-robin
            # (kombu's default, said out loud) keeps the tiers fair, as on RabbitMQ. Beat's
            # reconciler messages carry no priority: Redis files them at level 0, the highest.
            queue_order_strategy="round_robin",
            ack_emulation=cfg.redis_ack_emulation,
        )
    else:
        # RabbitMQ orders by priority only in queues declared with x-max-priority. The control
        # queue is left plain: its messages (reconciler passes) carry no priority. A job queue
        # declared earlier without the argument makes every declare fail (PRECONDITION_FAILED,
        # inequivalent arg 'x-max-priority'): delete it once; the reconciler republishes the
        # jobs whose messages went with it.
        job_queue_arguments = {"x-max-priority": MAX_BROKER_PRIORITY}
    app.conf.update(
        broker_url=cfg.broker_url,
        broker_connection_retry_on_startup=True,
        broker_transport_options=transport_options,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        # The default (nameless) exchange routes by queue name and needs no binding, so a
        # broker that lost its bindings (a flushed Redis) still delivers what is republished.
        task_queues=[
            *(
                Queue(name, Exchange(""), routing_key=name, queue_arguments=job_queue_arguments)
                for name in JOB_QUEUES
            ),
            Queue(CONTROL_QUEUE, Exchange(""), routing_key=CONTROL_QUEUE),
        ],
        task_default_queue=QUEUE_SMALL,
        task_create_missing_queues=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        worker_max_tasks_per_child=cfg.max_tasks_per_child or None,
        worker_send_task_events=False,
        # Beat keeps its schedule in memory: nothing to persist (the reconciler's interval is
        # the whole schedule), and no shelve file for two embedded beats to fight over.
        beat_scheduler="celery.beat:Scheduler",
        beat_schedule={
            "doclane-reconcile": {
                "task": RECONCILE_TASK,
                "schedule": reconcile.reconcile_interval_s,
                # A pass that waited longer than one interval is superseded by the next one.
                "options": {"queue": CONTROL_QUEUE, "expires": reconcile.reconcile_interval_s},
            },
            # Completion webhooks that are due (new, or due again after a failed try or a
            # sender that died): the outbox is the truth, so a lost pass loses nothing.
            "doclane-webhooks": {
                "task": WEBHOOKS_TASK,
                "schedule": webhook_poll_s,
                "options": {"queue": CONTROL_QUEUE, "expires": webhook_poll_s},
            },
        },
    )
    _register_tasks(app)
    runtime.bind_app(app)
    return app


def _register_tasks(app: Celery) -> None:
    # shared=False: a shared task joins every Celery app made later in the process, and a
    # second app (tests, the CLI's publisher) would then meet two tasks of one name.
    @app.task(
        shared=False,
        name=DRAIN_TASK,
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=True,
    )
    def drain(queue: str) -> None:
        """Drain ``queue``: claim and run its jobs in fair order until a claim finds nothing it
        may take or the time budget ends (the processor rings again then). Nothing is
        returned: a return value would only be repr'd and pickled back to the main process."""
        runtime.current_runtime().processor.drain(queue)

    @app.task(
        name=RECONCILE_TASK, shared=False, ignore_result=True, acks_late=False, time_limit=300
    )
    def reconcile() -> dict[str, Any]:
        """One reconciler pass (beat sends one every interval)."""
        rt = runtime.current_runtime()
        return reconcile_once(
            rt.store, rt.publisher, rt.reconcile_settings, inbox_dir=rt.inbox_dir
        ).to_dict()

    # A pass killed by its time limit loses nothing: its claim lapses and the next pass sends.
    @app.task(name=WEBHOOKS_TASK, shared=False, ignore_result=True, acks_late=False, time_limit=300)
    def deliver_webhooks() -> dict[str, Any]:
        """One delivery pass of the completion webhooks (beat sends one every poll interval)."""
        return runtime.current_runtime().webhooks().deliver_due().to_dict()


# ---- process lifecycle (signals are global: connected once, for whichever app runs) --------
@signals.setup_logging.connect(weak=False)
def _setup_logging(**_: Any) -> None:
    """Our handler, our filters (job context, secrets), our format; Celery's stays off.

    Celery's two lines per task ("received", "succeeded in") say what the processor's own
    "claimed" and "succeeded" lines say, with less: below DEBUG they are left out
    (logging was 8% of a worker's CPU per job). Their warnings and errors still show.
    """
    settings = read_settings().logs
    configure_logging(settings)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in CELERY_PER_TASK_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


@signals.worker_process_init.connect(weak=False)
def _process_init(**_: Any) -> None:
    runtime.start_runtime(warm=True)


@signals.worker_process_shutdown.connect(weak=False)
def _process_shutdown(**_: Any) -> None:
    runtime.stop_runtime()
