"""What the admin views ask outside PostgreSQL: the broker (queues) and Redis (the circuit
breakers every worker shares, and the workers' heartbeats).

``pipeline`` never imports Celery: the broker side is the :class:`Fleet` protocol, which
``workers.fleet.BrokerFleet`` implements and the composition roots (the CLI, ``doclane api``)
wire in. The breakers are read here, through the same ``OriginBreaker`` the workers use, so
state, failures and time to reset mean exactly what the workers act on; the live workers are
the nodes whose heartbeat has not expired (``pipeline.admin.heartbeats``).

Queue depths come from the broker, or (:class:`CountedFleet`, what ``doclane stats`` wires) from
the live workers' heartbeats, which carry each node's latest count with its age: a command that
starts, asks once and exits then loads no broker client at all while a worker is alive.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from pydantic import BaseModel

from pipeline.admin.heartbeats import CountedDepths, WorkerInfo, read_heartbeats, read_workers
from pipeline.mcp.endpoints import origin_of
from pipeline.mcp.settings import McpSettings
from pipeline.queues import ALL_QUEUES
from pipeline.resilience.settings import ResilienceSettings
from pipeline.resilience.shared import origin_breaker, redis_for_breakers
from pipeline.resilience.storage import BreakerRedis, RedisUnavailable, breaker_redis
from pipeline.support.secrets import mask_address

#: pybreaker keeps an origin's state at ``<namespace>:<origin>:pybreaker:state``.
_STATE_SUFFIX = ":pybreaker:state"


class QueueDepth(BaseModel):
    queue: str
    waiting: int
    #: Seconds since the messages were counted: 0 when the broker was asked for this answer, up
    #: to about a heartbeat (``DOCLANE_WORKER_HEARTBEAT_S``) when a worker's beat carried them.
    age_s: float = 0.0
    #: The worker node whose heartbeat carried the count; None: the broker was asked.
    counted_by: str | None = None


class BreakerState(BaseModel):
    origin: str
    state: str
    failures: int
    fail_max: int
    retry_after_s: float


class Fleet(Protocol):
    """The broker's side of the fleet."""

    def queue_depths(self) -> list[QueueDepth]:
        """Messages waiting in each of doclane's queues; raises when the broker cannot be
        asked."""
        ...


class CountedFleet:
    """Queue depths as the live workers last counted them (the freshest count their heartbeats
    carry), and from ``broker`` when no beat carries one: no worker alive, none that can reach
    the broker, or Redis not answering. Each depth says how old it is and whose count it is."""

    def __init__(self, settings: ResilienceSettings, broker: Fleet) -> None:
        self._settings = settings
        self._broker = broker

    def queue_depths(self) -> list[QueueDepth]:
        counted = self._counted()
        if counted is None:
            return self._broker.queue_depths()
        return [
            QueueDepth(queue=q, waiting=n, age_s=counted.age_s, counted_by=counted.node)
            for q, n in counted.waiting.items()
        ]

    def _counted(self) -> CountedDepths | None:
        if not self._settings.redis_url.strip():  # no heartbeats anywhere (the breakers say so)
            return None
        client = breaker_redis(self._settings.redis_url)
        try:
            return read_heartbeats(client, self._settings.breaker_namespace, ALL_QUEUES).depths
        except RedisUnavailable:  # the broker is asked instead; the workers part says why
            return None
        finally:
            client.close()


@contextmanager
def _naming_redis(settings: ResilienceSettings) -> Iterator[None]:
    """:class:`RedisUnavailable` again, saying which Redis did not answer (its password masked):
    an admin reads the message, not the client's own."""
    try:
        yield
    except RedisUnavailable as exc:
        where = mask_address(settings.redis_url)
        raise RedisUnavailable(f"Redis at {where} did not answer: {exc}") from exc


def read_breakers(settings: ResilienceSettings, origins: Sequence[str] = ()) -> list[BreakerState]:
    """Every known origin's circuit: those configured (``DOCLING_MCP_ORIGIN``), those given, and
    those the fleet has state for in Redis. Raises :class:`RedisUnavailable` when Redis is
    configured but does not answer: a breaker read from this process's memory would say
    "closed" about a circuit the fleet holds open."""
    client = redis_for_breakers(settings)
    known = set(origins) | set(_configured_origins())
    if client is not None:
        with _naming_redis(settings):
            client.ping()
            known |= _origins_in_redis(client, settings.breaker_namespace)
    try:
        return [_state_of(origin, settings, client) for origin in sorted(known)]
    finally:
        if client is not None:
            client.close()


def read_live_workers(settings: ResilienceSettings) -> list[WorkerInfo]:
    """The worker nodes whose heartbeat has not expired, in one round trip to Redis. Raises
    :class:`RedisUnavailable` when Redis does not answer, or none is configured (the workers
    then have nowhere to say they are alive)."""
    client = redis_for_breakers(settings)
    if client is None:
        raise RedisUnavailable("no DOCLANE_REDIS_URL: the workers' heartbeats live there")
    try:
        with _naming_redis(settings):
            return read_workers(client, settings.breaker_namespace)
    finally:
        client.close()


def _configured_origins() -> list[str]:
    try:
        return [origin_of(endpoint) for endpoint in McpSettings.from_environment().endpoints]
    except ValueError:  # a malformed DOCLING_MCP_ORIGIN is the workers' problem to report
        return []


def _origins_in_redis(client: BreakerRedis, namespace: str) -> set[str]:
    prefix = f"{namespace}:"
    found = set()
    for raw in client.scan_iter(match=f"{namespace}:*{_STATE_SUFFIX}", count=500):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        found.add(key[len(prefix) : -len(_STATE_SUFFIX)])
    return found


def _state_of(
    origin: str, settings: ResilienceSettings, client: BreakerRedis | None
) -> BreakerState:
    breaker = origin_breaker(origin, settings, client)
    snap = breaker.snapshot()
    return BreakerState(
        origin=origin,
        state=str(snap["state"]),
        failures=int(snap["failures"]),
        fail_max=int(snap["fail_max"]),
        retry_after_s=float(snap["retry_after_s"]),
    )
