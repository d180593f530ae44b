"""The live workers, from their own heartbeats in Redis: one round trip to read them all.

Celery's inspect broadcast cannot know how many workers exist, so it always waits its whole
timeout for their replies (a second of every ``doclane stats``). Instead each worker node (a
``doclane worker`` main process) writes its own key every ``DOCLANE_WORKER_HEARTBEAT_S``, with a
time to live of three beats, in the Redis the fleet shares for its breakers
(``DOCLANE_REDIS_URL``, under ``DOCLANE_BREAKER_NAMESPACE``)::

    <namespace>:workers              a set of node names
    <namespace>:workers:<node>       {"name", "concurrency", "tasks_done", "queues"}  EX 3 beats

A node that stops in order deletes its key; one that dies lets it expire, so "alive" means "beat
within the last three beats". The reader is one script: the set's members, each one's key,
and the members whose key expired dropped from the set.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel

log = logging.getLogger("doclane.admin")

#: Beats a key outlives its last write by: one late beat is not a death.
TTL_BEATS = 3

_READ = """
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local beat = redis.call('GET', KEYS[1] .. ':' .. name)
  if beat then table.insert(out, beat) else redis.call('SREM', KEYS[1], name) end
end
return out
"""


class WorkerInfo(BaseModel):
    """A worker node (``doclane worker``), as its latest heartbeat tells it."""

    name: str
    concurrency: int | None = None
    tasks_done: int | None = None
    queues: list[str] = []


class HeartbeatRedis(Protocol):
    """What the heartbeats need of a Redis client (redis-py's ``Redis``)."""

    def eval(self, script: str, numkeys: int, *keys_and_args: Any) -> Any: ...

    def pipeline(self, transaction: bool = True) -> Any: ...


def workers_key(namespace: str) -> str:
    return f"{namespace}:workers"


def beat(client: HeartbeatRedis, namespace: str, worker: WorkerInfo, interval_s: float) -> None:
    """Say that ``worker`` is alive for the next :data:`TTL_BEATS` beats (one round trip)."""
    key = workers_key(namespace)
    ttl_ms = max(1, int(interval_s * TTL_BEATS * 1000))
    pipe = client.pipeline(transaction=False)
    pipe.set(f"{key}:{worker.name}", worker.model_dump_json(), px=ttl_ms)
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
    beats: Sequence[bytes | str] = client.eval(_READ, 1, workers_key(namespace)) or []
    found = []
    for raw in beats:
        try:
            found.append(WorkerInfo.model_validate(json.loads(raw)))
        except ValueError:  # not a beat this doclane can read: said, and left out
            log.warning("unreadable worker heartbeat: %.200r", raw)
    return sorted(found, key=lambda w: w.name)
