"""Worker heartbeats in the real Redis: written, read in one script, expired, removed; the
queue depths they carry, aged on Redis's clock, and the broker asked when none carries any.

The keys live under this test's breaker namespace (tests/fixtures/isolation.py), so nothing here
sees another test's workers.
"""

from __future__ import annotations

import json

import redis

from pipeline.admin.fleet import CountedFleet, QueueDepth, read_live_workers
from pipeline.admin.heartbeats import (
    WorkerInfo,
    beat,
    read_heartbeats,
    read_workers,
    stop_beating,
    workers_key,
)
from pipeline.queues import ALL_QUEUES, QUEUE_SMALL
from pipeline.settings.tree import read_settings
from tests.fixtures.waiting import wait_for


def _client() -> redis.Redis:
    return redis.Redis.from_url(read_settings().resilience.redis_url)


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
    assert read_live_workers(read_settings().resilience) == [fading, steady]

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


def test_the_freshest_full_count_is_read_aged_by_the_keys_time_to_live(
    isolated_breakers: str,
) -> None:
    client = _client()
    namespace = isolated_breakers
    fresh = {**dict.fromkeys(ALL_QUEUES, 0), QUEUE_SMALL: 4}
    old = dict.fromkeys(ALL_QUEUES, 9)
    beat(client, namespace, WorkerInfo(name="old@host"), 60, depths=old, depths_age_s=50.0)
    beat(client, namespace, WorkerInfo(name="new@host"), 60, depths=fresh, depths_age_s=0.5)
    beat(client, namespace, WorkerInfo(name="mute@host"), 60)  # could not count
    part = {QUEUE_SMALL: 1}  # not every queue
    beat(client, namespace, WorkerInfo(name="part@host"), 60, depths=part)
    # Seven seconds since new@host wrote its beat, as Redis tells it: the key has 7 s less to live.
    key = f"{workers_key(namespace)}:new@host"
    client.pexpire(key, 60 * 3 * 1000 - 7000)

    read = read_heartbeats(client, namespace, ALL_QUEUES)

    assert [w.name for w in read.workers] == ["mute@host", "new@host", "old@host", "part@host"]
    assert read.depths is not None
    assert (read.depths.node, dict(read.depths.waiting)) == ("new@host", fresh)
    assert 7.5 <= read.depths.age_s < 50.0  # counted 0.5 s before a write 7 s (and a bit) ago
    assert read_heartbeats(client, namespace).depths is None, "no queues asked, none counted"


def test_a_count_whose_age_cannot_be_told_is_not_read(isolated_breakers: str) -> None:
    client = _client()
    namespace = isolated_breakers
    body = {"name": "forever@host", "queue_depths": dict.fromkeys(ALL_QUEUES, 1), "ttl_ms": 9000}
    client.set(f"{workers_key(namespace)}:forever@host", json.dumps(body))  # no time to live
    client.sadd(workers_key(namespace), "forever@host")
    read = read_heartbeats(client, namespace, ALL_QUEUES)
    assert [w.name for w in read.workers] == ["forever@host"] and read.depths is None


class _Broker:
    """A broker side that counts one message in every queue, and how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def queue_depths(self) -> list[QueueDepth]:
        self.asked += 1
        return [QueueDepth(queue=q, waiting=1) for q in ALL_QUEUES]


def test_depths_come_from_a_beat_and_from_the_broker_when_no_beat_has_any(
    isolated_breakers: str,
) -> None:
    broker = _Broker()
    fleet = CountedFleet(read_settings().resilience, broker)
    asked = fleet.queue_depths()
    assert [(d.queue, d.waiting, d.age_s, d.counted_by) for d in asked] == [
        (q, 1, 0.0, None) for q in ALL_QUEUES
    ]
    assert broker.asked == 1

    two = dict.fromkeys(ALL_QUEUES, 2)
    beat(_client(), isolated_breakers, WorkerInfo(name="w@host"), 60, depths=two)
    counted = fleet.queue_depths()
    assert [(d.queue, d.waiting, d.counted_by) for d in counted] == [
        (q, 2, "w@host") for q in ALL_QUEUES
    ]
    assert broker.asked == 1, "a beat's count: the broker is not asked"


def test_the_broker_is_asked_when_redis_does_not_answer() -> None:
    broker = _Broker()
    fleet = CountedFleet(
        read_settings(resilience=dict(redis_url="redis://127.0.0.1:1/0")).resilience, broker
    )
    assert [d.counted_by for d in fleet.queue_depths()] == [None] * len(ALL_QUEUES)
    assert broker.asked == 1
