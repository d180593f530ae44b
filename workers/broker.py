"""The broker as kombu sees it, without a Celery app: which transport a URL names, how doclane
lays its queues out on Redis, and how many messages a queue holds.

Celery is not needed to ask a broker how deep a queue is, and building its app costs a CLI
command a third of a second (the app, its tasks, the time limits from the MCP settings): ``doclane
stats`` and ``doclane api`` ask through a plain ``kombu.Connection`` configured here as the app
is, and the app (``workers.app``) takes its Redis layout from here, so both count the same lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from kombu.connection import Connection
from kombu.exceptions import OperationalError

from pipeline.queues import PRIORITY_LEVELS

#: The highest message priority level (``pipeline.queues.PRIORITY_LEVELS``); the job queues are
#: declared with ``x-max-priority`` of this value.
MAX_BROKER_PRIORITY = PRIORITY_LEVELS[-1]

#: Broker URL schemes served by kombu's Redis transport (``redis+socket`` has scheme ``redis``
#: once its ``+`` part is dropped).
REDIS_SCHEMES = frozenset({"redis", "rediss", "sentinel"})


def uses_redis_transport(broker_url: str | Sequence[str] | None) -> bool:
    """Whether the app's broker is Redis (the first URL of a failover list decides).

    Anything else is taken to be AMQP (RabbitMQ), Celery's own default when no URL is set.
    """
    if broker_url is None:
        return False
    first = broker_url.split(";")[0] if isinstance(broker_url, str) else broker_url[0]
    scheme = urlsplit(first.strip()).scheme.lower().split("+")[0]
    return scheme in REDIS_SCHEMES


#: How long a Redis command sent outside the worker's event loop (a publish, a queue's depth)
#: waits for its reply, and a connection for its handshake. Each answers in milliseconds; kombu
#: sets no deadline, so one sent to a broker whose packets vanish (a partition, a firewall that
#: drops rather than resets) waited on the kernel's retransmissions, minutes, and a submitter
#: with it. Above kombu's BRPOP timeout (1 s), which a synchronous drain waits out.
REDIS_SOCKET_TIMEOUT_S = 3.0
REDIS_CONNECT_TIMEOUT_S = 2.0


def redis_transport_options() -> dict[str, Any]:
    """Kombu's Redis transport options, the same for the Celery app and a plain connection.

    One Redis list per priority level ("doclane.small" is level 0, the highest; the others are
    "doclane.small:1" .. ":9"), so that each of the ten levels stays apart. With ":" as the
    separator, a queue name must not contain ":" (kombu splits it off). A queue's depth sums
    these lists. And the socket deadlines above; the worker's consumer is not held by them (its
    BRPOP runs in the event loop, where kombu's health check drops a connection gone silent).
    """
    return {
        "priority_steps": list(range(MAX_BROKER_PRIORITY + 1)),
        "sep": ":",
        "socket_timeout": REDIS_SOCKET_TIMEOUT_S,
        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_S,
    }


def waiting_in(conn: Connection, queue: str) -> int | None:
    """Messages waiting in ``queue`` (every priority level), by a passive declare.

    A queue the broker does not know holds nothing. None when the broker cannot be asked.
    The declare is made on the connection's default channel; the AMQP 404 of an unknown queue
    closes that channel and py-amqp reopens it at once, so one connection asks about every
    queue.
    """
    try:
        _, count, _ = conn.default_channel.queue_declare(queue=queue, passive=True)
    except conn.channel_errors:  # AMQP 404: no such queue (yet)
        return 0
    except (OperationalError, *conn.connection_errors):
        return None
    return int(count)
