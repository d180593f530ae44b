"""A worker node's beats carry the queue depths it counted just before each one: a broker that
cannot be counted costs the beat its count, never the beat, and a count too old is not sent."""

from __future__ import annotations

import redis

from pipeline.admin.fleet import QueueDepth
from pipeline.admin.heartbeats import read_heartbeats
from pipeline.queues import ALL_QUEUES, QUEUE_LARGE
from pipeline.settings.tree import read_settings
from workers.fleet import BrokerUnreachable
from workers.heartbeat import DepthCounter, HeartbeatThread


class _Broker:
    """Counts ``waiting`` in every queue, or fails as a broker that is down does."""

    def __init__(self) -> None:
        self.waiting = 3
        self.down = False

    def queue_depths(self) -> list[QueueDepth]:
        if self.down:
            raise BrokerUnreachable("the broker did not answer about doclane.small")
        return [QueueDepth(queue=q, waiting=self.waiting) for q in ALL_QUEUES]


def _node(counter: DepthCounter, namespace: str) -> HeartbeatThread:
    """A node's heartbeat, its beats written one at a time by the test (its thread not run)."""
    client = redis.Redis.from_url(read_settings().resilience.redis_url)
    return HeartbeatThread(
        client,
        namespace=namespace,
        node="n@host",
        concurrency=1,
        queues=[QUEUE_LARGE],
        interval_s=60,
        shown_url="redis",
        counter=counter,
    )


def test_each_beat_carries_a_count_made_for_it(isolated_breakers: str) -> None:
    broker = _Broker()
    counter = DepthCounter(broker, shown_url="broker")
    counter.start()
    node = _node(counter, isolated_breakers)
    try:
        node._beat()
        first = read_heartbeats(node.client, isolated_breakers, ALL_QUEUES).depths
        assert first is not None and first.node == "n@host"
        assert dict(first.waiting) == dict.fromkeys(ALL_QUEUES, 3)

        broker.waiting = 5
        node._beat()
        second = read_heartbeats(node.client, isolated_breakers, ALL_QUEUES).depths
        assert second is not None and dict(second.waiting) == dict.fromkeys(ALL_QUEUES, 5)
    finally:
        counter.stop()
        node.client.close()


def test_a_broker_that_cannot_be_counted_leaves_the_last_count_while_young() -> None:
    broker = _Broker()
    counter = DepthCounter(broker, shown_url="broker")
    counter.start()
    try:
        assert counter.count(wait_s=5, max_age_s=3600) is not None
        broker.down = True
        last = counter.count(wait_s=5, max_age_s=3600)
        assert last is not None and last[0] == dict.fromkeys(ALL_QUEUES, 3), "young: still sent"
        assert counter.count(wait_s=5, max_age_s=0) is None, "too old: not sent"
    finally:
        counter.stop()


def test_a_node_that_cannot_count_still_beats(isolated_breakers: str) -> None:
    broker = _Broker()
    broker.down = True
    counter = DepthCounter(broker, shown_url="broker")
    counter.start()
    node = _node(counter, isolated_breakers)
    try:
        node._beat()
        read = read_heartbeats(node.client, isolated_breakers, ALL_QUEUES)
        assert [w.name for w in read.workers] == ["n@host"] and read.depths is None
    finally:
        counter.stop()
        node.client.close()
