"""Job priorities on the broker: the mapping per transport, what is sent, how queues are set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from celery import Celery

from pipeline.queues import CONTROL_QUEUE, JOB_QUEUES, QUEUE_SMALL, Wakeup
from pipeline.settings.tree import read_settings
from workers.app import create_app
from workers.publisher import (
    DRAIN_TASK,
    MAX_BROKER_PRIORITY,
    CeleryPublisher,
    broker_priority,
    uses_redis_transport,
)

REDIS_URL = "redis://127.0.0.1:6379/0"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.mark.parametrize(
    ("priority", "amqp", "redis"),
    [
        (-32768, 0, 9),
        (-1, 0, 9),
        (0, 0, 9),
        (1, 1, 8),
        (5, 5, 4),
        (9, 9, 0),
        (10, 9, 0),
        (100, 9, 0),
        (32767, 9, 0),
    ],
)
def test_job_priorities_are_clamped_to_ten_levels_and_reversed_for_redis(
    priority: int, amqp: int, redis: int
) -> None:
    assert broker_priority(priority, redis=False) == amqp
    assert broker_priority(priority, redis=True) == redis


def test_a_higher_job_priority_is_never_served_later_on_either_transport() -> None:
    for low, high in zip(range(-3, 15), range(-2, 16), strict=True):
        # AMQP serves the larger number first, Redis the smaller one.
        assert broker_priority(high, redis=False) >= broker_priority(low, redis=False)
        assert broker_priority(high, redis=True) <= broker_priority(low, redis=True)
        assert 0 <= broker_priority(low, redis=True) <= MAX_BROKER_PRIORITY


@pytest.mark.parametrize(
    ("url", "redis"),
    [
        ("redis://127.0.0.1:6379/0", True),
        ("rediss://:secret@cache.example:6380/1", True),
        ("REDIS://127.0.0.1:6379/0", True),
        ("redis+socket:///run/redis.sock", True),
        ("sentinel://s1:26379;sentinel://s2:26379", True),
        (["redis://a:6379/0", "redis://b:6379/0"], True),
        ("amqp://guest:guest@127.0.0.1:5672//", False),
        ("amqps://rabbit.example//", False),
        ("pyamqp://guest@localhost//", False),
        ("amqp://a//;redis://b:6379/0", False),
        (None, False),
    ],
)
def test_the_broker_url_scheme_tells_the_transport(url: Any, redis: bool) -> None:
    assert uses_redis_transport(url) is redis


@dataclass
class _Conf:
    broker_url: str


@dataclass
class _RecordingApp:
    conf: _Conf
    sent: list[tuple[str, list[str], dict[str, Any]]] = field(default_factory=list)

    def send_task(self, name: str, args: list[str], **options: Any) -> None:
        self.sent.append((name, args, options))


class _Limits:
    def for_drain(self, queue: str) -> tuple[float, float]:
        return 100.0, 130.0


@pytest.mark.parametrize(("url", "expected"), [(REDIS_URL, 2), (AMQP_URL, 7)])
def test_the_publisher_sends_the_job_priority_on_the_broker_scale(url: str, expected: int) -> None:
    app = _RecordingApp(_Conf(url))
    publisher = CeleryPublisher(app, _Limits())  # type: ignore[arg-type]

    publisher.publish(Wakeup(QUEUE_SMALL, countdown_s=5, priority=7))

    [(name, args, options)] = app.sent
    assert (name, args) == (DRAIN_TASK, [QUEUE_SMALL]), "a bell names its queue, no job"
    assert options["priority"] == expected
    assert (options["queue"], options["countdown"], options["time_limit"]) == (QUEUE_SMALL, 5, 130)
    assert "task_id" not in options


def _app(url: str) -> Iterator[Celery]:
    app = create_app(read_settings(worker=dict(broker_url=url)))
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def redis_app() -> Iterator[Celery]:
    yield from _app(REDIS_URL)


@pytest.fixture
def amqp_app() -> Iterator[Celery]:
    yield from _app(AMQP_URL)


def test_redis_keeps_one_list_per_level_and_its_visibility_timeout(redis_app: Celery) -> None:
    options = redis_app.conf.broker_transport_options
    assert options["priority_steps"] == list(range(MAX_BROKER_PRIORITY + 1))
    assert options["sep"] == ":"
    assert options["queue_order_strategy"] == "round_robin"
    assert options["visibility_timeout"] > 0
    assert options["ack_emulation"] is False  # the reconciler, not an unacked hash, recovers
    assert all(q.queue_arguments is None for q in redis_app.amqp.queues.values())


def test_rabbitmq_job_queues_are_priority_queues_and_the_control_queue_is_not(
    amqp_app: Celery,
) -> None:
    queues = amqp_app.amqp.queues
    for name in JOB_QUEUES:
        assert queues[name].queue_arguments == {"x-max-priority": MAX_BROKER_PRIORITY}
    assert queues[CONTROL_QUEUE].queue_arguments is None
    assert "priority_steps" not in amqp_app.conf.broker_transport_options


def test_a_second_app_in_one_process_does_not_meet_the_first_ones_tasks() -> None:
    """Tests, the CLI's publisher and a worker each make an app: no task may be shared."""
    first = create_app(read_settings(worker=dict(broker_url=REDIS_URL)))
    second = create_app(read_settings(worker=dict(broker_url=REDIS_URL)))
    try:
        assert first.tasks[DRAIN_TASK] is not second.tasks[DRAIN_TASK]
        assert first.tasks[DRAIN_TASK].app is first and second.tasks[DRAIN_TASK].app is second
    finally:
        first.close()
        second.close()


def test_redis_ack_emulation_is_an_operator_s_choice() -> None:
    app = create_app(read_settings(worker=dict(broker_url=REDIS_URL, redis_ack_emulation=True)))
    try:
        assert app.conf.broker_transport_options["ack_emulation"] is True
    finally:
        app.close()
