"""Which origin a unit of work goes to (no services: breakers and counts in memory, no client
is made). The fleet-wide counts in Redis: tests/integration/resilience/test_fleet_in_flight.py."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence

import pytest

import errors
from pipeline.mcp.client import McpClient
from pipeline.mcp.endpoints import origin_of
from pipeline.resilience.breaker import OriginBreaker
from pipeline.resilience.in_flight import InFlight, Lease
from pipeline.resilience.pool import ServerPool

A, B, C = "http://a.test:1/mcp", "http://b.test:1/mcp", "http://c.test:1/mcp"


def no_client(endpoint: str) -> McpClient:
    raise AssertionError(f"choosing an origin must not create a client ({endpoint})")


def memory_breaker(origin: str) -> OriginBreaker:
    return OriginBreaker(
        origin, fail_max=1, reset_s=60, trial_ttl_s=60, redis_client=None, namespace="unit"
    )


def pool(*endpoints: str) -> ServerPool:
    return ServerPool(list(endpoints), no_client, memory_breaker)


def choose(
    p: ServerPool, avoid: Collection[str] = (), refused: Mapping[str, float] | None = None
) -> str:
    """The endpoint one unit would get, the unit over at once."""
    with p.chosen(avoid, refused or {}) as choice:
        return choice.endpoint


def trip(p: ServerPool, endpoint: str) -> None:
    def sick() -> None:
        raise errors.ServerUnavailable("HTTP 503")

    with pytest.raises(errors.ServerUnavailable):
        p.breaker(endpoint).call(sick)


def test_each_process_starts_its_round_where_its_index_says() -> None:
    """Pool processes of one worker start one origin apart, so that in step they stay apart."""
    rounds = [ServerPool([A, B], no_client, memory_breaker, first=index) for index in range(4)]
    assert [choose(p) for p in rounds] == [A, B, A, B]
    assert [choose(p) for p in rounds] == [B, A, B, A]
    assert [choose(ServerPool([A, B, C], no_client, memory_breaker, first=4))] == [B]


def test_round_robin_over_every_origin() -> None:
    p = pool(A, B, C)
    assert [choose(p) for _ in range(6)] == [A, B, C, A, B, C]


def test_an_open_circuit_takes_its_origin_out_of_the_turn() -> None:
    p = pool(A, B, C)
    trip(p, B)
    assert {choose(p) for _ in range(6)} == {A, C}


def test_a_sick_origin_is_avoided_while_another_is_usable() -> None:
    p = pool(A, B)
    assert {choose(p, avoid={A}) for _ in range(4)} == {B}
    assert {choose(pool(A), avoid={A}) for _ in range(2)} == {A}  # alone, it stays


def test_a_refused_origin_is_not_chosen_again_in_the_same_try() -> None:
    p = pool(A, B)
    assert {choose(p, refused={B: 5.0}) for _ in range(4)} == {A}


def test_every_circuit_open_is_e309_with_the_soonest_reset() -> None:
    p = pool(A, B)
    trip(p, A)
    with pytest.raises(errors.CircuitOpen) as caught:
        choose(p, refused={B: 2.5})  # B half-open with its trial running elsewhere
    assert caught.value.retry_after == 2.5  # sooner than A's 60 s
    assert caught.value.code == "E309" and caught.value.retryable
    trip(p, B)
    with pytest.raises(errors.CircuitOpen) as caught:
        choose(p)
    assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 60


def test_an_empty_pool_is_refused() -> None:
    with pytest.raises(ValueError):
        pool()


def test_a_unit_goes_where_fewest_are_in_flight_and_the_round_breaks_ties() -> None:
    """Threads of one process; without Redis the process's own counts decide."""
    p = pool(A, B, C)
    with p.chosen() as first, p.chosen() as second:
        assert (first.endpoint, second.endpoint) == (A, B)
        assert p.in_flight() == {A: 1, B: 1, C: 0}
        with p.chosen() as third, p.chosen() as fourth:
            # C had none; then all tie at one, and the round (now at A) breaks the tie
            assert (third.endpoint, fourth.endpoint) == (C, A)
            assert p.in_flight() == {A: 2, B: 1, C: 1}
        assert choose(p) == C  # A and B still hold one each
    assert p.in_flight() == {A: 0, B: 0, C: 0}


def test_a_long_unit_keeps_the_others_off_its_origin() -> None:
    """The round alone would send every other unit to A; the count sends them to B."""
    p = pool(A, B)
    with p.chosen() as long_one:
        assert long_one.endpoint == A
        assert [choose(p) for _ in range(4)] == [B, B, B, B]


def test_the_count_ends_with_the_unit_whatever_happens_in_it() -> None:
    p = pool(A, B)
    with pytest.raises(errors.ServerUnavailable), p.chosen():
        raise errors.ServerUnavailable("HTTP 503")
    assert p.in_flight() == {A: 0, B: 0}


def test_units_on_several_threads_are_counted_exactly() -> None:
    p = pool(A, B)
    inside = threading.Barrier(9)
    done = threading.Event()
    taken: list[str] = []

    def unit() -> None:
        with p.chosen() as choice:
            taken.append(choice.endpoint)
            inside.wait(30)
            done.wait(30)

    threads = [threading.Thread(target=unit) for _ in range(8)]
    for thread in threads:
        thread.start()
    inside.wait(30)
    assert p.in_flight() == {A: 4, B: 4}
    done.set()
    for thread in threads:
        thread.join(30)
    assert p.in_flight() == {A: 0, B: 0}


class CountingInFlight(InFlight):
    """Counts in memory, and how often it was asked."""

    def __init__(self) -> None:
        super().__init__(None, namespace="unit", ttl_s=60, retry_s=60)
        self.starts = 0

    def start(self, origins: Sequence[str]) -> Lease:
        self.starts += 1
        return super().start(origins)


def test_one_origin_is_never_counted() -> None:
    """Nothing to choose: no count, so no round trip to Redis on the busiest path."""
    counting = CountingInFlight()
    p = ServerPool([A], no_client, memory_breaker, in_flight=counting)
    assert [choose(p) for _ in range(3)] == [A, A, A]
    assert counting.starts == 0
    two = ServerPool([A, B], no_client, memory_breaker, in_flight=counting)
    choose(two)
    assert counting.starts == 1


def test_origins_are_counted_by_origin() -> None:
    """Two spellings of one server share its count, as they share its breaker."""
    counting = InFlight(None, namespace="unit", ttl_s=60, retry_s=60)
    p = ServerPool([A, "http://a.test:1/other", B], no_client, memory_breaker, in_flight=counting)
    with p.chosen() as first:
        assert first.endpoint == A
        assert counting.counts([origin_of(A), origin_of(B)]) == {origin_of(A): 1, origin_of(B): 0}
        assert choose(p) == B  # the other spelling of A comes next in the round, but A is busy


def test_one_origin_leaves_its_circuit_to_the_breakers_admission() -> None:
    """No read of the circuit when there is nothing to choose: the breaker's call reads it, and
    its E309 comes back as ``refused`` and leaves the pool with the breaker's wait."""
    p = pool(A)
    trip(p, A)
    assert choose(p) == A
    with pytest.raises(errors.CircuitOpen) as caught:
        choose(p, refused={A: 3.0})
    assert caught.value.retry_after == 3.0 and caught.value.code == "E309"
