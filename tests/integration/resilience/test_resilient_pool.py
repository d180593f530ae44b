"""The pool in trouble: a half-open origin is skipped, not an error; all open is a quiet E309.
And what choosing among several origins costs in Redis round trips, with Redis and without.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

import errors
from pipeline.mcp.client import McpClient
from pipeline.resilience.facade import build_resilient
from pipeline.resilience.in_flight import InFlight
from pipeline.resilience.pool import ServerPool
from pipeline.resilience.retry import RetryRecord
from pipeline.resilience.shared import origin_breaker
from pipeline.resilience.storage import BreakerRedis
from pipeline.settings.tree import read_settings
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.redis_server import PrivateRedis
from tests.fixtures.waiting import wait_for
from tests.support.shared_redis import SHARED_REDIS

ROOT = Path(__file__).resolve().parents[3]
DOCX = str(ROOT / "examples" / "quarterly-report.docx")
CONVERT = "convert_document_into_docling_document"


def convert(client: McpClient) -> str:
    client.call_tool(CONVERT, {"source": DOCX})
    return client.origin


def requests_seen(server: FakeServer) -> int:
    return sum(server.stats()["http_requests_by_verb"].values())


def test_a_half_open_origin_with_its_trial_running_is_skipped(fake_server_factory: Any) -> None:
    first, second = fake_server_factory(), fake_server_factory()
    settings = read_settings(resilience=dict(breaker_fail_max=1, breaker_reset_s=0.05)).resilience
    with build_resilient(read_settings().mcp, settings, endpoints=[first.url, second.url]) as r:
        breaker = r.pool.breaker(first.url)

        def sick() -> None:
            raise errors.ServerUnavailable("HTTP 503")

        with pytest.raises(errors.ServerUnavailable):
            breaker.call(sick)
        wait_for(lambda: breaker.retry_after() == 0, timeout=10, message="reset time passed")
        inside, release = threading.Event(), threading.Event()

        def held_trial() -> None:
            inside.set()
            release.wait(30)

        # the first origin's one trial, held open (another process's, in real life)
        trial = threading.Thread(target=breaker.call, args=(held_trial,))
        trial.start()
        assert inside.wait(30)
        try:
            records = [RetryRecord() for _ in range(4)]
            served = [r.run(convert, record=record) for record in records]
        finally:
            release.set()
            trial.join(30)
        assert served == [second.origin] * 4  # no E309 while another origin is usable
        assert [record.tries for record in records] == [1, 1, 1, 1]
        assert requests_seen(first) == 0


def test_every_circuit_open_is_e309_without_a_request(fake_server_factory: Any) -> None:
    first, second = fake_server_factory(), fake_server_factory()
    settings = read_settings(
        resilience=dict(breaker_fail_max=1, breaker_reset_s=60, retry_max_tries=1)
    ).resilience
    with build_resilient(read_settings().mcp, settings, endpoints=[first.url, second.url]) as r:
        for server in (first, second):
            server.configure(fail_next=-1, fail_with="http503", fail_methods=["initialize"])
        for _ in range(2):  # each unit fails on one origin; the circuits open one by one
            with pytest.raises(errors.ServerUnavailable):
                r.run(convert, record=RetryRecord())
        seen = requests_seen(first) + requests_seen(second)
        assert r.refusing_for() == 0, "failures, but no unit has met every circuit open yet"
        record = RetryRecord()
        with pytest.raises(errors.CircuitOpen) as caught:
            r.run(convert, record=record)
        # Redis keeps whole seconds: the wait is never early, at most a second late
        assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 61
        assert record.tries == 1  # E309 is not retried inside the worker
        assert requests_seen(first) + requests_seen(second) == seen
        assert {b["state"] for b in r.breakers()} == {"open"}
        # what a worker reads before it claims a job: the circuits' wait, without a request
        assert 0 < r.refusing_for() <= caught.value.retry_after
        for server in (first, second):
            server.reset()
        for breaker in r.pool.breakers():
            breaker.reset()  # an operator who knows the servers are back
        assert r.run(convert, record=RetryRecord()) in (first.origin, second.origin)
        assert r.refusing_for() == 0, "a unit that went through ends the wait"


class CountingRedis(BreakerRedis):
    """The breakers' Redis client, saying which commands it sent (one per round trip here)."""

    sent: list[str]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return super().execute_command(*args, **options)


@pytest.fixture
def counting_redis() -> Iterator[Any]:
    made: list[CountingRedis] = []

    def make(url: str = SHARED_REDIS) -> CountingRedis:
        client = cast(
            CountingRedis,
            CountingRedis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0),
        )
        client.sent = []
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def no_client(endpoint: str) -> McpClient:
    raise AssertionError(f"choosing must not create a client ({endpoint})")


def pool_on(client: BreakerRedis, namespace: str, origins: list[str]) -> ServerPool:
    settings = read_settings(resilience=dict(breaker_fail_max=1, breaker_reset_s=3600)).resilience
    return ServerPool(
        origins,
        no_client,
        lambda origin: origin_breaker(origin, settings, client),
        in_flight=InFlight(client, namespace=namespace, ttl_s=60, retry_s=0.2),
    )


def unit_on(pool: ServerPool) -> str:
    """One unit through the pool: chosen, admitted by its breaker, ended."""
    with pool.chosen() as choice:
        return pool.call(choice, lambda: choice.endpoint)


def test_a_unit_among_four_origins_reads_every_circuit_in_one_round_trip(
    isolated_breakers: str, counting_redis: Any
) -> None:
    """Three round trips whatever the number of origins: the circuits, the choice, the end.
    (One read per origin and one more for the chosen breaker's admission made it seven.)"""
    client = counting_redis()
    origins = [f"http://docling-{n}.test:5001" for n in range(4)]
    pool = pool_on(client, isolated_breakers, origins)
    unit_on(pool)  # Redis learns the in-flight script (EVAL after EVALSHA's NOSCRIPT)
    client.sent.clear()
    served = [unit_on(pool) for _ in range(4)]
    assert sorted(served) == origins  # one each: the counts and the round still spread them
    assert client.sent == ["MGET", "EVALSHA", "ZREM"] * 4

    sick = origins[1]

    def fail() -> None:
        raise errors.ServerUnavailable("HTTP 503")

    with pytest.raises(errors.ServerUnavailable):
        pool.breaker(sick).call(fail)  # fail_max=1: its circuit opens, in Redis
    other = pool_on(counting_redis(), isolated_breakers, origins)  # another process
    assert sick not in {unit_on(other) for _ in range(8)}


def test_without_redis_the_circuits_are_read_from_memory_and_units_go_on(
    isolated_breakers: str, counting_redis: Any, private_redis: PrivateRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    origins = [f"http://docling-{n}.test:5001" for n in range(3)]
    client = counting_redis(private_redis.url)
    pool = pool_on(client, isolated_breakers, origins)
    assert all(b.shared for b in pool.breakers())
    private_redis.stop()
    client.sent.clear()
    caplog.set_level(logging.WARNING, logger="doclane.resilience")
    assert sorted(unit_on(pool) for _ in range(3)) == origins
    assert not any(b.shared for b in pool.breakers())
    # the one failed read sent every circuit to memory; none was tried again on its own
    assert client.sent.count("MGET") == 1
    fallen = [r for r in caplog.records if "falls back to per-process memory" in r.getMessage()]
    assert sorted(getattr(r, "origin", None) for r in fallen) == sorted(
        b.origin for b in pool.breakers()
    )
