"""Worker heartbeats in the real Redis: written, read in one script, expired, removed.

The keys live under this test's breaker namespace (tests/fixtures/isolation.py), so nothing here
sees another test's workers.
"""

from __future__ import annotations

import redis

from pipeline.admin import WorkerInfo, read_live_workers
from pipeline.admin.heartbeats import beat, read_workers, stop_beating, workers_key
from pipeline.resilience import load_resilience_settings
from tests.fixtures.waiting import wait_for


def _client() -> redis.Redis:
    return redis.Redis.from_url(load_resilience_settings().redis_url)


def test_a_beat_is_read_back_until_it_expires_and_the_dead_node_leaves_the_set(
    isolated_breakers: str,
) -> None:
    client = _client()
    namespace = isolated_breakers
    steady = WorkerInfo(name="steady@host", concurrency=2, tasks_done=7, queues=["doclane.small"])
    fading = WorkerInfo(name="fading@host", concurrency=1, tasks_done=0)
    beat(client, namespace, steady, interval_s=60)
    beat(client, namespace, fading, interval_s=0.1)  # alive for three beats: 0.3 s
    assert read_workers(client, namespace) == [fading, steady]
    assert read_live_workers(load_resilience_settings()) == [fading, steady]

    wait_for(lambda: read_workers(client, namespace) == [steady], message="fading expired")
    assert client.smembers(workers_key(namespace)) == {b"steady@host"}, "the dead left the set"

    stop_beating(client, namespace, steady.name)
    assert read_workers(client, namespace) == []
    assert client.smembers(workers_key(namespace)) == set()


def test_an_unreadable_beat_is_left_out(isolated_breakers: str) -> None:
    client = _client()
    namespace = isolated_breakers
    beat(client, namespace, WorkerInfo(name="good@host"), interval_s=60)
    client.set(f"{workers_key(namespace)}:odd@host", b"not json", ex=60)
    client.sadd(workers_key(namespace), "odd@host")
    assert [w.name for w in read_workers(client, namespace)] == ["good@host"]
