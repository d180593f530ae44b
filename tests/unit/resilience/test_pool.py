"""Which origin a unit of work goes to (no services: breakers in memory, no client is made)."""

from __future__ import annotations

import pytest

import errors
from pipeline.mcp import McpClient
from pipeline.resilience import OriginBreaker, ServerPool

A, B, C = "http://a.test:1/mcp", "http://b.test:1/mcp", "http://c.test:1/mcp"


def no_client(endpoint: str) -> McpClient:
    raise AssertionError(f"choosing an origin must not create a client ({endpoint})")


def memory_breaker(origin: str) -> OriginBreaker:
    return OriginBreaker(
        origin, fail_max=1, reset_s=60, trial_ttl_s=60, redis_client=None, namespace="unit"
    )


def pool(*endpoints: str) -> ServerPool:
    return ServerPool(list(endpoints), no_client, memory_breaker)


def trip(p: ServerPool, endpoint: str) -> None:
    def sick() -> None:
        raise errors.ServerUnavailable("HTTP 503")

    with pytest.raises(errors.ServerUnavailable):
        p.breaker(endpoint).call(sick)


def test_each_process_starts_its_round_where_its_index_says() -> None:
    """Pool processes of one worker start one origin apart, so that in step they stay apart."""
    rounds = [ServerPool([A, B], no_client, memory_breaker, first=index) for index in range(4)]
    assert [p.choose() for p in rounds] == [A, B, A, B]
    assert [p.choose() for p in rounds] == [B, A, B, A]
    assert [ServerPool([A, B, C], no_client, memory_breaker, first=4).choose()] == [B]


def test_round_robin_over_every_origin() -> None:
    p = pool(A, B, C)
    assert [p.choose() for _ in range(6)] == [A, B, C, A, B, C]


def test_an_open_circuit_takes_its_origin_out_of_the_turn() -> None:
    p = pool(A, B, C)
    trip(p, B)
    assert {p.choose() for _ in range(6)} == {A, C}


def test_a_sick_origin_is_avoided_while_another_is_usable() -> None:
    p = pool(A, B)
    assert {p.choose(avoid={A}) for _ in range(4)} == {B}
    assert {pool(A).choose(avoid={A}) for _ in range(2)} == {A}  # alone, it stays


def test_a_refused_origin_is_not_chosen_again_in_the_same_try() -> None:
    p = pool(A, B)
    assert {p.choose(refused={B: 5.0}) for _ in range(4)} == {A}


def test_every_circuit_open_is_e309_with_the_soonest_reset() -> None:
    p = pool(A, B)
    trip(p, A)
    with pytest.raises(errors.CircuitOpen) as caught:
        p.choose(refused={B: 2.5})  # B half-open with its trial running elsewhere
    assert caught.value.retry_after == 2.5  # sooner than A's 60 s
    assert caught.value.code == "E309" and caught.value.retryable
    trip(p, B)
    with pytest.raises(errors.CircuitOpen) as caught:
        p.choose()
    assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 60


def test_an_empty_pool_is_refused() -> None:
    with pytest.raises(ValueError):
        pool()
