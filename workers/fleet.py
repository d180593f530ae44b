"""The broker's side of the admin views (``pipeline.admin.Fleet``) on Celery.

Queue depth is a passive declare per queue (``CeleryPublisher.waiting``); live workers are
Celery's inspect ``stats`` broadcast, which waits its whole timeout for answers. The app it
gets is made to give up quickly on a broker that is down: an admin asking "what is going on"
must not wait for the retries a submitter's publish is allowed.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from pipeline.admin import QueueDepth, WorkerInfo
from pipeline.queues import CONTROL_QUEUE, JOB_QUEUES
from workers.publisher import CeleryPublisher

#: Connection attempts before a broker is reported unreachable.
_BROKER_TRIES = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


class BrokerUnreachable(ConnectionError):
    """The broker did not answer."""


class CeleryFleet:
    def __init__(self, app: Celery, *, inspect_timeout_s: float = 1.0) -> None:
        app.conf.broker_transport_options = {**app.conf.broker_transport_options, **_BROKER_TRIES}
        app.conf.broker_connection_timeout = 2.0
        self.app = app
        self.inspect_timeout_s = inspect_timeout_s
        self._publisher = CeleryPublisher(app)

    def queue_depths(self) -> list[QueueDepth]:
        depths = []
        for queue in (*JOB_QUEUES, CONTROL_QUEUE):
            waiting = self._publisher.waiting(queue)
            if waiting is None:
                raise BrokerUnreachable(f"the broker did not answer about {queue}")
            depths.append(QueueDepth(queue=queue, waiting=waiting))
        return depths

    def workers(self) -> list[WorkerInfo]:
        replies: dict[str, Any] = (
            self.app.control.inspect(timeout=self.inspect_timeout_s).stats() or {}
        )
        return [_worker(name, reply) for name, reply in sorted(replies.items())]


def _worker(name: str, reply: Any) -> WorkerInfo:
    pool = reply.get("pool", {}) if isinstance(reply, dict) else {}
    total = reply.get("total", {}) if isinstance(reply, dict) else {}
    concurrency = pool.get("max-concurrency") if isinstance(pool, dict) else None
    done = sum(v for v in total.values() if isinstance(v, int)) if isinstance(total, dict) else None
    return WorkerInfo(
        name=name,
        concurrency=concurrency if isinstance(concurrency, int) else None,
        tasks_done=done,
    )
