"""The one door to the Docling servers: ``retry(breaker(unit))`` over a pool of origins.

Workers and the ``doclane mcp`` diagnostics both call through :class:`Resilient`, so an
operator's ``doclane mcp call`` meets the same retry, the same fleet-wide breaker and the same
error codes as a conversion does. The size-based timeout is innermost, inside the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from errors import classify
from pipeline.mcp import McpClient, McpSettings, load_mcp_settings

from .breaker import OriginBreaker
from .pool import ServerPool
from .retry import RetryRecord, retry_call
from .settings import ResilienceSettings, load_resilience_settings

T = TypeVar("T")
log = logging.getLogger("doclane.resilience")

#: A unit of work: everything that must happen on one server, e.g. convert then export.
Unit = Callable[[McpClient], T]


class Resilient:
    """Runs units of work with retry outside, the origin's breaker inside."""

    def __init__(self, pool: ServerPool, settings: ResilienceSettings) -> None:
        self.pool = pool
        self.settings = settings

    def run(
        self,
        unit: Callable[[McpClient], T],
        *,
        label: str = "conversion",
        record: RetryRecord | None = None,
    ) -> T:
        """Run ``unit`` on one origin per try; raise the last catalog error when it fails.

        E309 (every circuit open) leaves at once with ``retry_after``; other non-retryable
        errors leave after their first try.
        """
        sick: set[str] = set()

        def one_try() -> T:
            endpoint = self.pool.choose(avoid=sick)
            breaker = self.pool.breaker(endpoint)
            try:
                return breaker.call(lambda: unit(self.pool.ready_client(endpoint)))
            except Exception as exc:
                if classify(exc).trips_breaker:
                    sick.add(endpoint)
                raise

        return retry_call(one_try, self.settings, label=label, record=record)

    def breakers(self) -> list[dict[str, Any]]:
        """Each origin's circuit: state, failures, time to reset (for ping --json and stats)."""
        return [b.snapshot() for b in self.pool.breakers()]

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Resilient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redis_for_breakers(settings: ResilienceSettings) -> redis.Redis | None:
    """A Redis client for breaker state (bytes, not decoded: pybreaker stores integers)."""
    client = redis.Redis.from_url(
        settings.redis_url,
        decode_responses=False,
        socket_connect_timeout=1.0,
        socket_timeout=2.0,
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        log.warning(
            "Redis at %s unreachable (%s): circuit breakers fall back to per-process memory",
            settings.redis_url.rsplit("@", 1)[-1],
            exc,
        )
        client.close()
        return None
    return client


def build_resilient(
    mcp_settings: McpSettings | None = None,
    settings: ResilienceSettings | None = None,
    *,
    endpoints: list[str] | None = None,
    client_factory: Callable[[str], McpClient] | None = None,
) -> Resilient:
    """Compose the pool from settings: ``DOCLING_MCP_ORIGIN`` may list several origins."""
    mcp = mcp_settings if mcp_settings is not None else load_mcp_settings()
    res = settings if settings is not None else load_resilience_settings()
    shared = redis_for_breakers(res)

    def make_breaker(origin: str) -> OriginBreaker:
        return OriginBreaker(
            origin,
            fail_max=res.breaker_fail_max,
            reset_s=res.breaker_reset_s,
            trial_ttl_s=res.breaker_trial_ttl_s,
            redis_client=shared,
            namespace=res.breaker_namespace,
        )

    factory = client_factory or (lambda endpoint: McpClient(endpoint, settings=mcp))
    pool = ServerPool(endpoints or mcp.endpoints, factory, make_breaker)
    return Resilient(pool, res)
