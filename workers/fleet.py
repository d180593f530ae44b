"""The broker's side of the admin views (``pipeline.admin.Fleet``) on Celery.

Queue depth is a passive declare per queue (``CeleryPublisher.waiting``). The live workers are
not asked here: each worker node writes its own heartbeat into Redis (``workers.heartbeat``),
read in one round trip, where Celery's inspect broadcast always waits its whole timeout. The
app it gets is made to give up quickly on a broker that is down: an admin asking "what is going
on" must not wait for the retries a submitter's publish is allowed.
"""

from __future__ import annotations

from celery import Celery

from pipeline.admin import QueueDepth
from pipeline.queues import CONTROL_QUEUE, JOB_QUEUES
from workers.publisher import CeleryPublisher

#: Connection attempts before a broker is reported unreachable.
_BROKER_TRIES = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


class BrokerUnreachable(ConnectionError):
    """The broker did not answer."""


class CeleryFleet:
    def __init__(self, app: Celery) -> None:
        app.conf.broker_transport_options = {**app.conf.broker_transport_options, **_BROKER_TRIES}
        app.conf.broker_connection_timeout = 2.0
        self.app = app
        self._publisher = CeleryPublisher(app)

    def queue_depths(self) -> list[QueueDepth]:
        depths = []
        for queue in (*JOB_QUEUES, CONTROL_QUEUE):
            waiting = self._publisher.waiting(queue)
            if waiting is None:
                raise BrokerUnreachable(f"the broker did not answer about {queue}")
            depths.append(QueueDepth(queue=queue, waiting=waiting))
        return depths
