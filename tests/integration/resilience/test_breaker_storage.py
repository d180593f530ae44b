"""Where breaker state lives: one trial across processes through Redis, and Redis going away.

Two breakers with two Redis clients on one namespace are two processes of a fleet, as far as
the shared state is concerned (the CLI tests in test_fleet_breaker.py use real processes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

import errors
from pipeline.resilience.breaker import OriginBreaker
from pipeline.resilience.storage import BreakerRedis
from tests.fixtures.redis_server import PrivateRedis
from tests.fixtures.waiting import wait_for

ORIGIN = "http://docling.test:5001"


def process_breaker(
    client: BreakerRedis,
    namespace: str,
    *,
    fail_max: int = 1,
    reset_s: float = 0.05,
    redis_retry_s: float = 30.0,
) -> OriginBreaker:
    return OriginBreaker(
        ORIGIN, fail_max=fail_max, reset_s=reset_s, trial_ttl_s=60, redis_client=client,
        namespace=namespace, redis_retry_s=redis_retry_s,
    )  # fmt: skip


def fail(error: Exception) -> Callable[[], None]:
    def call() -> None:
        raise error

    return call


def held_call(
    run: Callable[[Callable[[], str]], object],
) -> tuple[threading.Event, threading.Event]:
    """Start ``run(call)`` in a thread; the call stays inside until the second event is set."""
    inside, release = threading.Event(), threading.Event()

    def call() -> str:
        inside.set()
        release.wait(30)
        return "trial"

    threading.Thread(target=run, args=(call,), daemon=True).start()
    assert inside.wait(30), "the held call never started"
    return inside, release


def test_doclane_admits_one_trial_across_processes(
    isolated_breakers: str, clients: Callable[..., BreakerRedis]
) -> None:
    one = process_breaker(clients(), isolated_breakers)
    two = process_breaker(clients(), isolated_breakers)
    with pytest.raises(errors.ServerUnavailable):
        one.call(fail(errors.ServerUnavailable("HTTP 503")))
    assert two.snapshot()["state"] == "open"
    wait_for(lambda: two.retry_after() == 0, timeout=10, message="reset time passed")
    _, release = held_call(one.call)
    try:
        with pytest.raises(errors.CircuitOpen) as caught:
            two.call(lambda: "second trial")
        assert caught.value.retry_after is not None and caught.value.retry_after > 0
    finally:
        release.set()
    wait_for(lambda: two.snapshot()["state"] == "closed", timeout=10, message="trial closed it")
    assert two.call(lambda: "ok") == "ok"


def test_a_redis_outage_falls_back_to_memory_and_the_fleet_state_returns(
    private_redis: PrivateRedis,
    isolated_breakers: str,
    clients: Callable[..., BreakerRedis],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    breaker = process_breaker(
        clients(private_redis.url), isolated_breakers, fail_max=2, reset_s=60, redis_retry_s=0.2
    )
    with pytest.raises(errors.CallTimeout):
        breaker.call(fail(errors.CallTimeout("slow")))
    assert (breaker.shared, breaker.snapshot()["failures"]) == (True, 1)

    private_redis.stop()
    assert breaker.call(lambda: "ok") == "ok"  # conversions go on without Redis
    assert breaker.shared is False
    for _ in range(2):  # ... and the breaker still protects the server, from memory
        with pytest.raises(errors.ServerUnavailable):
            breaker.call(fail(errors.ServerUnavailable("HTTP 503")))
    with pytest.raises(errors.CircuitOpen):
        breaker.call(lambda: "not sent")
    downs = [r for r in caplog.records if "falls back to per-process memory" in r.message]
    assert len(downs) == 1  # said once, not once per call
    assert not [r for r in caplog.records if r.name == "pybreaker"]  # no traceback per call

    private_redis.start()  # a fresh Redis: another process of the fleet opens the circuit there
    other = process_breaker(clients(private_redis.url), isolated_breakers, fail_max=1, reset_s=60)
    assert other.call(lambda: "ok") == "ok"
    wait_for(lambda: breaker.snapshot()["shared"], timeout=10, message="back on Redis")
    assert breaker.snapshot()["state"] == "closed"  # the fleet's state, not the memory's
    with pytest.raises(errors.ServerUnavailable):
        other.call(fail(errors.ServerUnavailable("HTTP 503")))
    with pytest.raises(errors.CircuitOpen):  # opened by the other process, seen here
        breaker.call(lambda: "not sent")
    assert any("answers again" in r.message for r in caplog.records)


def test_a_process_started_without_redis_joins_the_fleet_later(
    private_redis: PrivateRedis, isolated_breakers: str, clients: Callable[..., BreakerRedis]
) -> None:
    private_redis.stop()
    late = process_breaker(clients(private_redis.url), isolated_breakers, redis_retry_s=0.2)
    assert late.shared is False and late.call(lambda: "ok") == "ok"
    private_redis.start()
    wait_for(lambda: late.snapshot()["shared"], timeout=10, message="joined the fleet")


def test_one_read_tells_the_state_and_count_that_pybreaker_keeps(
    isolated_breakers: str, clients: Callable[..., BreakerRedis]
) -> None:
    """``peek`` reads pybreaker's own keys in one round trip: it must agree with them."""
    one = process_breaker(clients(), isolated_breakers, fail_max=3, reset_s=3600)
    two = process_breaker(clients(), isolated_breakers, fail_max=3, reset_s=3600)
    assert two.storage.peek() == ("closed", 0)

    with pytest.raises(errors.ServerUnavailable):
        one.call(fail(errors.ServerUnavailable("HTTP 503")))
    assert two.storage.peek() == ("closed", 1) == (two.storage.state, two.storage.counter)

    assert two.call(lambda: "ok") == "ok"  # a success resets the fleet's count
    assert one.storage.peek() == ("closed", 0)

    for _ in range(3):
        with pytest.raises(errors.ServerUnavailable):
            one.call(fail(errors.ServerUnavailable("HTTP 503")))
    assert two.storage.peek() == ("open", 3) == (two.storage.state, two.storage.counter)
    with pytest.raises(errors.CircuitOpen):
        two.call(lambda: "refused")


def test_a_state_redis_lost_reads_as_closed_and_is_put_back(
    isolated_breakers: str, clients: Callable[..., BreakerRedis]
) -> None:
    client = clients()
    breaker = process_breaker(client, isolated_breakers, fail_max=3)
    client.delete(*client.keys(f"{isolated_breakers}:*"))  # a flushed broker database

    assert breaker.storage.peek() == ("closed", 0)
    assert client.get(f"{isolated_breakers}:{ORIGIN}:pybreaker:state") == b"closed"
