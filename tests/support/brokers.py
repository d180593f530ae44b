"""A message broker of one's own: a claimed Redis database, or a RabbitMQ vhost's handle.

A plain module (no pytest): the fixtures of tests/fixtures/brokers.py and the benches of bench/
claim their Redis databases the same way, so a test session and a bench running side by side
never share one. A claim is a lock key in one of Redis's numbered databases (15 down to 8),
naming the claiming process; a dead process's claim may be taken over.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from pipeline.queues import JOB_QUEUES, WAKE_BELLS
from tests.fixtures.processes import pid_alive

REDIS_HOST = os.environ.get("DOCLANE_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("DOCLANE_TEST_REDIS_PORT", "6379"))
RABBITMQ_URL = os.environ.get("DOCLANE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
_LOCK = "doclane:test-broker-owner"


def small_queue_messages(jobs: int) -> int:
    """How many bells a submission of ``jobs`` small jobs (one chunk) rings: a bell a job, up
    to :data:`pipeline.queues.WAKE_BELLS`."""
    return min(jobs, WAKE_BELLS)


CANDIDATE_DBS = range(15, 7, -1)


#: FLUSHDB and taking the claim again, in one step: no other session can slip in between.
_FLUSH_KEEPING_CLAIM = (
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "redis.call('FLUSHDB') redis.call('SET', KEYS[1], ARGV[1], 'EX', 7200) return 1"
)
#: FLUSHDB only while the claim is still ours (a later session's database is never touched).
_RELEASE = (
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end redis.call('FLUSHDB') return 1"
)


@dataclass
class Broker:
    kind: str
    url: str
    redis_db: int | None = None
    vhost: str | None = None
    #: Whatever must stop before the broker goes away (clusters of worker processes).
    users: list[Any] = field(default_factory=list)

    def flush(self) -> None:
        """Lose every waiting message: FLUSHDB (keeping this test's claim), or on RabbitMQ a
        purge of doclane's queues in this test's vhost (messages a worker holds stay held)."""
        if self.redis_db is not None:
            assert self._script(_FLUSH_KEEPING_CLAIM) == 1, "the broker database is not ours"
            return
        assert self.vhost is not None, "only a broker of this test's own may be flushed"
        for queue in JOB_QUEUES:
            rabbitmqctl("purge_queue", "-p", self.vhost, queue)

    def release(self) -> None:
        """Stop the users, then empty the database (messages, bindings and the claim)."""
        for user in reversed(self.users):
            user.close()
        if self.redis_db is not None:
            self._script(_RELEASE)

    def keys(self, pattern: str) -> list[bytes]:
        """The Redis keys of this broker's database matching ``pattern``."""
        assert self.redis_db is not None, "a Redis broker's keys"
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=self.redis_db)
        try:
            return sorted(cast("list[bytes]", client.keys(pattern)))  # no decode_responses
        finally:
            client.close()

    def _script(self, source: str) -> int:
        assert self.redis_db is not None, "a Redis broker's script"
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=self.redis_db)
        try:
            return int(client.eval(source, 1, _LOCK, _owner()))
        finally:
            client.close()

    def __str__(self) -> str:
        return self.kind


def _owner() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


#: Keys a Celery broker leaves behind; a database holding only these and no claim is a dead
#: session's (workers that wrote after its clean-up), and may be taken.
_BROKER_KEYS = re.compile(rb"^(doclane\.|_kombu\.|unacked)")


#: Take a database atomically: only if it is unclaimed (ARGV[2] empty) or still claimed by the
#: dead session named in ARGV[2]; everything in it is then a leftover, and goes.
_TAKE = (
    "local holder = redis.call('GET', KEYS[1]) "
    "if (ARGV[2] == '' and holder) or (ARGV[2] ~= '' and holder ~= ARGV[2]) then return 0 end "
    "redis.call('FLUSHDB') redis.call('SET', KEYS[1], ARGV[1], 'EX', 7200) return 1"
)


def _claimable(client: redis.Redis) -> bool:
    holder = cast("bytes | None", client.get(_LOCK))  # no decode_responses
    if holder is None:
        keys = list(client.scan_iter(count=100))
        if keys and not all(_BROKER_KEYS.match(k) for k in keys):
            return False  # someone else's data
        return bool(client.eval(_TAKE, 1, _LOCK, _owner(), ""))
    host, _, pid = holder.decode().partition(":")
    if host == os.uname().nodename and pid.isdigit() and not pid_alive(int(pid)):
        dead = holder.decode()
        return bool(client.eval(_TAKE, 1, _LOCK, _owner(), dead))
    return False


def claim_redis_broker() -> Broker | None:
    """The first of :data:`CANDIDATE_DBS` that is free (or a dead session's), now claimed by this
    process and emptied; ``None`` when every one is someone else's. ``release()`` gives it back."""
    for db in CANDIDATE_DBS:
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        try:
            if _claimable(client):
                return Broker("redis", f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}", redis_db=db)
        finally:
            client.close()
    return None


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=60)
