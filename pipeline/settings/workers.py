"""Settings of the Celery workers and of the broker every publisher reaches them through.

They live with the tree rather than in ``workers``, because the CLI publishes through the
broker too, and ``pipeline`` never imports ``workers``.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.queues import ALL_QUEUES
from pipeline.support.settings import CommaList, Section

DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"


class WorkerSettings(Section):
    """The broker, and how a ``doclane worker`` consumes it."""

    #: Redis by default; ``amqp://user:pass@host:5672//`` for RabbitMQ.
    broker_url: str = DEFAULT_BROKER_URL
    #: Queues a worker consumes, comma-separated in the environment.
    worker_queues: CommaList[str] = ALL_QUEUES
    #: Worker processes per ``doclane worker`` (``--concurrency``); each converts one job at a
    #: time with its own MCP client.
    worker_concurrency: int = Field(default=2, ge=1)
    #: Run beat (the reconciler's clock) inside ``doclane worker``. Several beats are harmless
    #: (a pass is idempotent) but wasteful: large fleets run one ``doclane beat`` instead.
    worker_beat: bool = True
    #: Extra seconds a task may run past its soft limit before it is killed.
    time_limit_grace_s: float = Field(default=30.0, ge=0)
    #: Override the computed broker visibility timeout (Redis: when an unacked message is
    #: redelivered). Must stay above the longest hard limit plus the longest countdown.
    visibility_timeout_s: float | None = Field(default=None, gt=0)
    #: Recycle a worker process after this many tasks (bounds slow leaks); 0 = never.
    max_tasks_per_child: int = Field(default=0, ge=0)
    #: How often a worker node writes its heartbeat into Redis (DOCLANE_REDIS_URL), where
    #: ``doclane stats``, the API and /metrics read the live workers in one round trip; a node
    #: whose heartbeat is three beats old counts as gone. Each node counts the queues' messages
    #: before each beat, and ``doclane stats`` shows the freshest count instead of asking the
    #: broker.
    worker_heartbeat_s: float = Field(default=5.0, gt=0)
    #: Redis only: kombu's emulation of acknowledgements, which copies every delivered message
    #: into an "unacked" hash and deletes it on ack (two Redis round trips per job) so that a
    #: dead worker's messages come back after the visibility timeout. Off: a worker holds its
    #: unacknowledged messages in memory (a pool process that dies still gives its message
    #: back), and what a whole worker held when it died is brought back by the reconciler from
    #: the database (expired leases, stale queued and retrying jobs), as every lost message is.
    redis_ack_emulation: bool = False
