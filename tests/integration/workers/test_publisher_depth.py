"""What the reconciler and the admin views read from the broker: how many messages wait in a
queue; the admin views (``doclane stats``, the API) ask without a Celery app, and load none (nor
httpx)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kombu import Connection

from pipeline.admin.heartbeats import WorkerInfo, beat
from pipeline.api.metrics import FleetCollector
from pipeline.queues import (
    ALL_QUEUES,
    CONTROL_QUEUE,
    JOB_QUEUES,
    QUEUE_LARGE,
    QUEUE_MEDIUM,
    QUEUE_SMALL,
    Wakeup,
)
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from workers.app import create_app
from workers.broker import redis_transport_options, uses_redis_transport, waiting_in
from workers.fleet import BrokerFleet, BrokerUnreachable
from workers.publisher import CeleryPublisher


@pytest.fixture
def publisher(any_broker: Broker) -> Iterator[CeleryPublisher]:
    app = create_app(read_settings(worker=dict(broker_url=any_broker.url)))
    yield CeleryPublisher(app)
    app.close()


def test_waiting_counts_every_priority_level_and_an_unknown_queue_holds_nothing(
    publisher: CeleryPublisher,
) -> None:
    assert publisher.waiting("doclane.never-declared") == 0
    for priority in (0, 4, 9, 100):
        publisher.publish(Wakeup(QUEUE_SMALL, priority=priority))

    # An AMQP publish is not a round trip: the broker counts the messages a moment later.
    wait_for(lambda: publisher.waiting(QUEUE_SMALL) == 4, timeout=30, message="4 waiting")
    assert publisher.waiting(QUEUE_MEDIUM) == 0


def test_an_unreachable_broker_cannot_say() -> None:
    app = create_app(read_settings(worker=dict(broker_url="redis://127.0.0.1:1/0")))
    app.conf.broker_connection_timeout = 0.5
    try:
        assert CeleryPublisher(app).waiting(QUEUE_SMALL) is None
    finally:
        app.close()


def test_depths_count_every_priority_level_of_every_queue(
    any_broker: Broker, publisher: CeleryPublisher, store: JobStore
) -> None:
    fleet = BrokerFleet(any_broker.url)
    assert [d.queue for d in fleet.queue_depths()] == [*JOB_QUEUES, CONTROL_QUEUE]
    for priority in (0, 4, 9, 100):
        publisher.publish(Wakeup(QUEUE_SMALL, priority=priority))
    publisher.publish(Wakeup(QUEUE_LARGE, priority=3))

    def depths() -> dict[str, int]:
        return {d.queue: d.waiting for d in fleet.queue_depths()}

    # An AMQP publish is not a round trip: the broker counts the messages a moment later.
    wait_for(lambda: depths()[QUEUE_SMALL] == 4, timeout=30, message="4 waiting")
    assert depths()[QUEUE_LARGE] == 1
    assert depths()[CONTROL_QUEUE] == 0

    # /metrics: the bells; the backlog is PostgreSQL's (no job is queued: bells say nothing)
    scraped = {
        f.name: {s.labels["queue"]: s.value for s in f.samples}
        for f in FleetCollector(store, fleet, read_settings().resilience).collect()
        if f.name in ("doclane_queue_depth", "doclane_queue_backlog")
    }
    assert scraped["doclane_queue_depth"][QUEUE_SMALL] == 4
    assert scraped["doclane_queue_backlog"] == dict.fromkeys(JOB_QUEUES, 0.0)


def test_one_connection_still_answers_after_an_unknown_queue(
    any_broker: Broker, publisher: CeleryPublisher
) -> None:
    """An AMQP 404 closes the channel it was asked on, and py-amqp reopens it: a count of every
    queue is one connection to the broker (a worker counts before each beat), not one per
    queue."""
    publisher.publish(Wakeup(QUEUE_LARGE, priority=3))
    layout = redis_transport_options() if uses_redis_transport(any_broker.url) else {}
    with Connection(any_broker.url, transport_options=layout) as conn:

        def unknown_then_large() -> bool:
            return waiting_in(conn, "doclane.never-declared") == 0 and (
                waiting_in(conn, QUEUE_LARGE) == 1
            )

        # An AMQP publish is not a round trip: the broker counts the message a moment later.
        wait_for(unknown_then_large, timeout=30, message="1 waiting, asked after a 404")


def test_an_unreachable_broker_is_reported() -> None:
    with pytest.raises(BrokerUnreachable):
        BrokerFleet("redis://127.0.0.1:1/0").queue_depths()


@pytest.mark.parametrize("counted", [True, False], ids=["a-beat-counted", "no-beat-counted"])
def test_stats_loads_neither_celery_nor_httpx(
    migrated_database_url: str, redis_broker: Broker, tmp_path: Path, counted: bool
) -> None:
    """Building the Celery app to ask four queue depths cost every ``doclane stats`` a third
    of a second of imports and set-up; parsing the configured origins with ``httpx.URL`` cost
    another tenth (httpx loads rich, pygments and click); kombu, to ask the broker, a tenth
    more, unless no live worker's beat carries a count. Asked here as an operator asks: a
    worker alive (its heartbeat), two origins configured, one of them internationalised."""
    resilience = read_settings().resilience
    heartbeats = redis.Redis.from_url(resilience.redis_url)
    depths = {**dict.fromkeys(ALL_QUEUES, 0), QUEUE_LARGE: 7} if counted else None
    alive = WorkerInfo(name="alive@host")
    beat(heartbeats, resilience.breaker_namespace, alive, interval_s=600, depths=depths)
    heartbeats.close()
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLING_MCP_ORIGIN": "http://127.0.0.1:8765, HTTPS://Bücher.example:443/mcp",
    }
    script = (
        "import runpy, sys\n"
        "sys.argv = ['doclane', 'stats', '--json']\n"
        "try:\n"
        "    runpy.run_module('pipeline.cli', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('celery', 'httpx'))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
        "print('KOMBU', 'kombu' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    stats = json.loads(done.stdout)
    assert [d["queue"] for d in stats["bells"]] == list(ALL_QUEUES), done.stderr
    assert [d["queue"] for d in stats["queues"]] == list(JOB_QUEUES)
    assert [w["name"] for w in stats["workers"]] == ["alive@host"]
    assert [b["origin"] for b in stats["breakers"]] == [
        "http://127.0.0.1:8765",
        "https://bücher.example",
    ]
    assert "LOADED []" in done.stderr, done.stderr[-2000:]
    if counted:  # the beat's count, said to be one, and no broker client loaded
        assert {d["queue"]: d["waiting"] for d in stats["bells"]} == depths
        assert {d["counted_by"] for d in stats["bells"]} == {"alive@host"}
        assert "KOMBU False" in done.stderr, done.stderr[-2000:]
    else:  # the broker asked, as it answers now
        assert {d["counted_by"] for d in stats["bells"]} == {None}
        assert {d["age_s"] for d in stats["bells"]} == {0.0}
