"""The live workers, from their own heartbeats in Redis: one round trip to read them all.

Celery's inspect broadcast cannot know how many workers exist, so it always waits its whole
timeout for their replies (a second of every ``doclane stats``). Instead each worker node (a
``doclane worker`` main process) writes its own key every ``DOCLANE_WORKER_HEARTBEAT_S``, with a
time to live of three beats, in the Redis the fleet shares for its breakers
(``DOCLANE_REDIS_URL``, under ``DOCLANE_BREAKER_NAMESPACE``)::

    <namespace>:workers              a set of node names
    <namespace>:workers:<node>       {"name", "concurrency", "tasks_done", "queues",
                                      "queue_depths", "depths_age_s", "ttl_ms"}  PX 3 beats

A node that stops in order deletes its key; one that dies lets it expire, so "alive" means "beat
within the last three beats". The reader is one script: the set's members, each one's key with
its time to live, and the members whose key expired dropped from the set.

A beat also carries the messages waiting in each of doclane's queues as its node last counted
them (``queue_depths``; ``workers.heartbeat``), so that ``doclane stats`` need not load a broker
client (kombu, a tenth of a second of its start) to show them while workers are alive. How old a
count is comes from Redis alone, not from two hosts' clocks: its age when the beat was written
(``depths_age_s``, the node's own monotonic clock) plus the time since the write (the key's time
to live ``ttl_ms`` less what is left of it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

log = logging.getLogger("doclane.admin")

#: Beats a key outlives its last write by: one late beat is not a death.
TTL_BEATS = 3

_READ = """
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = KEYS[1] .. ':' .. name
  local beat = redis.call('GET', key)
  if beat then
    table.insert(out, beat)
    table.insert(out, redis.call('PTTL', key))
  else
    redis.call('SREM', KEYS[1], name)
  end
end
return out
"""


class WorkerInfo(BaseModel):
    """A worker node (``doclane worker``), as its latest heartbeat tells it."""

    name: str
    concurrency: int | None = None
    tasks_done: int | None = None
    queues: list[str] = []


class _Counts(BaseModel):
    """What a beat says of the queues besides the node (readers of the node ignore it)."""

    queue_depths: dict[str, int] | None = None
    depths_age_s: float = 0.0
    ttl_ms: int = 0


@dataclass(frozen=True)
class CountedDepths:
    """Messages waiting in each queue, as a worker node counted them ``age_s`` seconds ago."""

    waiting: Mapping[str, int]
    age_s: float
    node: str


@dataclass(frozen=True)
class Heartbeats:
    """What the live nodes' beats say: the nodes, and the freshest queue count among them (None
    when no beat carries one: no node alive, or none could count)."""

    workers: list[WorkerInfo]
    depths: CountedDepths | None


class HeartbeatRedis(Protocol):
    """What the heartbeats need of a Redis client (redis-py's ``Redis``)."""

    def eval(self, script: str, numkeys: int, *keys_and_args: Any) -> Any: ...

    def pipeline(self, transaction: bool = True) -> Any: ...


def workers_key(namespace: str) -> str:
    return f"{namespace}:workers"


def beat(
    client: HeartbeatRedis,
    namespace: str,
    worker: WorkerInfo,
    interval_s: float,
    *,
    depths: Mapping[str, int] | None = None,
    depths_age_s: float = 0.0,
) -> None:
    """Say that ``worker`` is alive for the next :data:`TTL_BEATS` beats (one round trip), with
    the queue depths it counted ``depths_age_s`` seconds ago, if it has any."""
    key = workers_key(namespace)
    ttl_ms = max(1, int(interval_s * TTL_BEATS * 1000))
    counts = _Counts(
        queue_depths=dict(depths) if depths is not None else None,
        depths_age_s=depths_age_s,
        ttl_ms=ttl_ms,
    )
    body = {**worker.model_dump(mode="json"), **counts.model_dump(mode="json")}
    pipe = client.pipeline(transaction=False)
    pipe.set(f"{key}:{worker.name}", json.dumps(body), px=ttl_ms)
    pipe.sadd(key, worker.name)
    pipe.execute()


def stop_beating(client: HeartbeatRedis, namespace: str, name: str) -> None:
    """The node stopped in order: it is gone now, not three beats from now."""
    key = workers_key(namespace)
    pipe = client.pipeline(transaction=False)
    pipe.delete(f"{key}:{name}")
    pipe.srem(key, name)
    pipe.execute()


def read_workers(client: HeartbeatRedis, namespace: str) -> list[WorkerInfo]:
    """Every node whose heartbeat has not expired, by name."""
    return read_heartbeats(client, namespace).workers


def read_heartbeats(
    client: HeartbeatRedis, namespace: str, queues: Sequence[str] = ()
) -> Heartbeats:
    """Every node whose heartbeat has not expired, by name, and the freshest count of
    ``queues`` among their beats (a beat that did not count every one of them is passed over)."""
    flat: Sequence[Any] = client.eval(_READ, 1, workers_key(namespace)) or []
    found = []
    freshest: CountedDepths | None = None
    for raw, pttl in zip(flat[::2], flat[1::2], strict=True):
        try:
            data = json.loads(raw)
            worker = WorkerInfo.model_validate(data)
        except ValueError:  # not a beat this doclane can read: said, and left out
            log.warning("unreadable worker heartbeat: %.200r", raw)
            continue
        found.append(worker)
        counted = _counted(data, int(pttl), worker.name, queues)
        if counted is not None and (freshest is None or counted.age_s < freshest.age_s):
            freshest = counted
    return Heartbeats(sorted(found, key=lambda w: w.name), freshest)


def _counted(data: Any, pttl_ms: int, node: str, queues: Sequence[str]) -> CountedDepths | None:
    """The count of ``queues`` a beat carries, aged to now; None when it carries none, misses a
    queue, or cannot say how old it is."""
    try:
        counts = _Counts.model_validate(data)
    except ValueError:  # a node's count this doclane cannot read: its node still listed
        return None
    waiting = counts.queue_depths
    if waiting is None or not queues or not set(queues) <= waiting.keys():
        return None
    if pttl_ms < 0 or counts.ttl_ms <= 0:  # no time to live: the write's moment is unknown
        return None
    # Written with ttl_ms to live, pttl_ms left: the time since the write, on Redis's clock.
    since_write_s = max(0, counts.ttl_ms - pttl_ms) / 1000
    return CountedDepths(
        {q: waiting[q] for q in queues}, round(counts.depths_age_s + since_write_s, 3), node
    )
