"""Units in flight counted across the fleet in Redis: the pool's choice of origin.

The "processes" here are real processes (``python -c``, each with its own Redis client) where
what is proved is fleet-wide: several choosing while the others hold their units, one killed
mid-unit. Redis going away uses a private Redis server (tests/fixtures/redis_server.py).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import errors
from pipeline.mcp.client import McpClient
from pipeline.resilience.facade import build_resilient
from pipeline.resilience.in_flight import InFlight, Lease
from pipeline.resilience.storage import BreakerRedis
from pipeline.settings.tree import read_settings
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.redis_server import PrivateRedis
from tests.fixtures.waiting import wait_for
from tests.support.shared_redis import SHARED_REDIS

ROOT = Path(__file__).resolve().parents[3]
ORIGINS = [f"http://docling-{n}.test:5001" for n in range(4)]
DOCX = str(ROOT / "examples" / "quarterly-report.docx")
CONVERT = "convert_document_into_docling_document"

#: One process of the fleet: takes a unit on the origins given (in the same order as every
#: other process: all with pool index 0, as one-process workers on many hosts), prints the
#: origin it got, holds the unit until its stdin closes, then ends it.
HOLDER = """
import sys
from pipeline.resilience.in_flight import InFlight, Lease
from pipeline.resilience.storage import breaker_redis
url, namespace, ttl_s, *origins = sys.argv[1:]
counts = InFlight(breaker_redis(url), namespace=namespace, ttl_s=float(ttl_s), retry_s=30)
lease = counts.start(origins)
print(lease.origin, "shared" if lease.member else "local", flush=True)
sys.stdin.read()
counts.end(lease)
"""


@pytest.fixture
def holders() -> Iterator[Callable[..., tuple[subprocess.Popen[str], str]]]:
    """Start holder processes; each is stopped (stdin closed, or killed) at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(namespace: str, *origins: str, ttl_s: float = 60.0) -> tuple[Any, str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, SHARED_REDIS, namespace, str(ttl_s), *origins],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line, f"the holder said nothing: {proc.communicate(timeout=30)[1]}"
        origin, where = line
        assert where == "shared"
        return proc, origin

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def release(proc: subprocess.Popen[str]) -> None:
    """Let a holder end its unit and exit."""
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def counts_of(client: BreakerRedis, namespace: str, ttl_s: float = 60.0) -> InFlight:
    return InFlight(client, namespace=namespace, ttl_s=ttl_s, retry_s=30)


def test_processes_holding_units_send_the_next_one_where_fewest_are(
    isolated_breakers: str,
    clients: Callable[..., BreakerRedis],
    holders: Callable[..., tuple[subprocess.Popen[str], str]],
) -> None:
    """Every process prefers the first origin; the fleet's count spreads them all the same."""
    taken = [holders(isolated_breakers, *ORIGINS) for _ in range(4)]
    assert sorted(origin for _, origin in taken) == sorted(ORIGINS)
    here = counts_of(clients(), isolated_breakers)
    assert here.counts(ORIGINS) == dict.fromkeys(ORIGINS, 1)
    # this process has nothing in flight itself, and still does not pile onto the first origin
    busy = next(proc for proc, origin in taken if origin == ORIGINS[0])
    release(busy)
    lease = here.start(ORIGINS[::-1])  # its own preference: the last origin first
    assert lease.origin == ORIGINS[0] and lease.member is not None
    here.end(lease)
    for proc, _ in taken:
        if proc is not busy:
            release(proc)
    assert here.counts(ORIGINS) == dict.fromkeys(ORIGINS, 0)


def test_a_killed_process_leaves_its_count_until_the_lease_expires(
    isolated_breakers: str,
    clients: Callable[..., BreakerRedis],
    holders: Callable[..., tuple[subprocess.Popen[str], str]],
) -> None:
    first, second = ORIGINS[:2]
    proc, origin = holders(isolated_breakers, first, second, ttl_s=4.0)
    assert origin == first
    proc.send_signal(signal.SIGKILL)  # mid-unit: its end never comes
    proc.wait(timeout=30)
    here = counts_of(clients(), isolated_breakers)
    assert here.counts([first, second]) == {first: 1, second: 0}
    lease = here.start([first, second])
    assert lease.origin == second  # the dead process's unit still counts
    here.end(lease)
    wait_for(
        lambda: here.counts([first, second]) == {first: 0, second: 0},
        timeout=30,
        message="the killed process's lease expired",
    )
    lease = here.start([first, second])
    assert lease.origin == first
    here.end(lease)
    client = clients()
    wait_for(
        lambda: client.exists(f"{isolated_breakers}:{first}:in_flight") == 0,
        timeout=30,
        message="the set of leases expired with its last lease",
    )


def test_without_redis_each_process_chooses_by_its_own_counts(
    private_redis: PrivateRedis,
    clients: Callable[..., BreakerRedis],
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = ORIGINS[:2]
    here = InFlight(
        clients(private_redis.url), namespace="ns", ttl_s=60, retry_s=0.2, where="private Redis"
    )
    other = counts_of(clients(private_redis.url), "ns")
    others_unit = other.start([first, second])
    held = here.start([first, second])
    assert (others_unit.origin, held.origin) == (first, second)  # shared: the other's counts
    private_redis.stop()
    caplog.set_level(logging.WARNING, logger="doclane.resilience.in_flight")
    local = [here.start([first, second]) for _ in range(3)]
    # its own units only: one held on the second origin, so the first, then a tie, and so on
    assert [lease.origin for lease in local] == [first, first, second]
    assert all(lease.member is None for lease in local)
    assert not here.shared
    for lease in [*local, held]:
        here.end(lease)  # the held lease cannot be removed from a Redis that is gone: no error
    assert here.counts([first, second]) == {first: 0, second: 0}
    outage = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(outage) == 1, "one warning per outage, not one per unit"

    private_redis.start()  # a restarted Redis knows neither the leases nor the script

    def back_in_redis() -> Lease | None:
        lease = here.start([first, second])
        if lease.member is None:  # retry_s has not passed yet
            here.end(lease)
            return None
        return lease

    back = wait_for(back_in_redis, timeout=30, message="the counts back in Redis")
    assert back.origin == first
    assert other.counts([first, second]) == {first: 1, second: 0}  # seen by another process
    here.end(back)
    assert any("answers again" in r.getMessage() for r in caplog.records)


def held_unit(origin_seen: list[str], inside: threading.Event, go: threading.Event) -> Any:
    def unit(client: McpClient) -> str:
        origin_seen.append(client.origin)
        inside.set()
        go.wait(30)
        return client.origin

    return unit


def convert(client: McpClient) -> str:
    client.call_tool(CONVERT, {"source": DOCX})
    return client.origin


def test_two_workers_over_two_servers_do_not_share_one(fake_server_factory: Any) -> None:
    """Through the whole door (retry, breaker, pool): two processes' pools, both starting their
    rounds at the first server; the second's unit goes to the server the first is not using."""
    first, second = fake_server_factory(), fake_server_factory()
    endpoints = [first.url, second.url]
    settings = read_settings().resilience
    one = build_resilient(read_settings().mcp, settings, endpoints=endpoints)
    two = build_resilient(read_settings().mcp, settings, endpoints=endpoints)
    try:
        seen: list[str] = []
        inside, go = threading.Event(), threading.Event()
        holder = threading.Thread(target=one.run, args=(held_unit(seen, inside, go),))
        holder.start()
        assert inside.wait(30)
        try:
            assert one.pool.in_flight() == {first.url: 1, second.url: 0}
            assert [two.run(convert) for _ in range(3)] == [second.origin] * 3
        finally:
            go.set()
            holder.join(30)
        assert seen == [first.origin]
        assert two.pool.in_flight() == {first.url: 0, second.url: 0}
        assert first.stats()["requests_by_tool"].get(CONVERT, 0) == 0
    finally:
        one.close()
        two.close()


def test_a_unit_that_fails_everywhere_leaves_no_count(fake_server_factory: Any) -> None:
    servers: list[FakeServer] = [fake_server_factory(), fake_server_factory()]
    for server in servers:
        server.configure(fail_next=-1, fail_with="http503", fail_methods=["tools/call"])
    settings = read_settings(resilience=dict(retry_max_tries=3, breaker_fail_max=2)).resilience
    with build_resilient(read_settings().mcp, settings, endpoints=[s.url for s in servers]) as r:
        for _ in range(3):  # failures, then E309 once both circuits are open
            with pytest.raises((errors.ServerUnavailable, errors.CircuitOpen)):
                r.run(convert)
        assert {b["state"] for b in r.breakers()} == {"open"}
        assert r.pool.in_flight() == {s.url: 0 for s in servers}
