"""The broker's side of the admin views (``pipeline.admin.fleet.Fleet``), asked through kombu alone.

Queue depth is a passive declare per queue (``workers.broker.waiting_in``), all on one plain
``kombu.Connection`` laid out as the Celery app lays its queues out: building the app to ask
four numbers cost ``doclane stats`` a third of a second. The live workers are not asked here:
each worker node writes its own heartbeat into Redis (``workers.heartbeat``), read in one round
trip, where Celery's inspect broadcast always waits its whole timeout. A broker that is down is
given up on quickly: an admin asking "what is going on" must not wait for the retries a
submitter's publish is allowed.
"""

from __future__ import annotations

from typing import Any

from kombu.connection import Connection

from pipeline.admin.fleet import QueueDepth
from pipeline.queues import ALL_QUEUES
from workers.broker import redis_transport_options, uses_redis_transport, waiting_in

#: Connection attempts before a broker is reported unreachable.
_BROKER_TRIES = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
#: Seconds a connection attempt may take.
_CONNECT_TIMEOUT_S = 2.0


class BrokerUnreachable(ConnectionError):
    """The broker did not answer."""


class BrokerFleet:
    """Queue depths from the broker at ``broker_url`` (``DOCLANE_BROKER_URL``)."""

    def __init__(self, broker_url: str) -> None:
        options: dict[str, Any] = dict(_BROKER_TRIES)
        if uses_redis_transport(broker_url):
            options.update(redis_transport_options())
        self._url = broker_url
        self._options = options

    def queue_depths(self) -> list[QueueDepth]:
        depths = []
        with Connection(
            self._url, connect_timeout=_CONNECT_TIMEOUT_S, transport_options=self._options
        ) as conn:
            for queue in ALL_QUEUES:
                waiting = waiting_in(conn, queue)
                if waiting is None:
                    raise BrokerUnreachable(f"the broker did not answer about {queue}")
                depths.append(QueueDepth(queue=queue, waiting=waiting))
        return depths
