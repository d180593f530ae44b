"""The one door to the Docling servers: ``retry(breaker(unit))`` over a pool of origins.

Workers and the ``doclane mcp`` diagnostics both call through :class:`Resilient`, so an
operator's ``doclane mcp call`` meets the same retry, the same fleet-wide breaker and the same
error codes as a conversion does. The size-based timeout is innermost, inside the client.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from errors import CircuitOpen, classify
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.support.closing import Closing
from pipeline.support.secrets import mask_address

from .in_flight import InFlight
from .pool import Choice, ServerPool
from .retry import RetryRecord, retry_call
from .settings import ResilienceSettings
from .shared import origin_breaker, redis_for_breakers
from .storage import BreakerRedis

T = TypeVar("T")
log = logging.getLogger("doclane.resilience")

#: A unit of work: everything that must happen on one server, e.g. convert then export.
Unit = Callable[[McpClient], T]


class Resilient(Closing):
    """Runs units of work with retry outside, the origin's breaker inside."""

    def __init__(
        self,
        pool: ServerPool,
        settings: ResilienceSettings,
        *,
        redis_client: BreakerRedis | None = None,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self._redis = redis_client  # closed with the pool
        #: Until when (monotonic) every circuit refuses, as the last unit that met them learnt.
        self._refused_until = 0.0

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
            refused: dict[str, float] = {}
            while True:
                with self.pool.chosen(avoid=sick, refused=refused) as choice:
                    endpoint = choice.endpoint
                    try:
                        return self.pool.call(choice, functools.partial(self._on, endpoint, unit))
                    except CircuitOpen as exc:  # refused at admission: nothing was sent
                        refused[endpoint] = exc.retry_after or 0.0
                    except Exception as exc:
                        if classify(exc).trips_breaker:
                            sick.add(endpoint)
                        raise

        try:
            result = retry_call(one_try, self.settings, label=label, record=record)
        except CircuitOpen as exc:
            self._refused_until = time.monotonic() + (exc.retry_after or 0.0)
            raise
        self._refused_until = 0.0
        return result

    def on_each_server(self, look: Callable[[McpClient], T]) -> list[T | None]:
        """``look`` once on every server's client, through its breaker and without retry:
        what each answered, in the pool's order; None for a server that did not (its circuit
        open, unreachable, or ``look`` failed: a failure counts against its breaker as any
        call's does)."""
        answers: list[T | None] = []
        for endpoint in self.pool.endpoints:
            try:
                answer = self.pool.call(
                    Choice(endpoint), functools.partial(self._on, endpoint, look)
                )
            except Exception as exc:
                log.info("no answer from %s: %s", mask_address(endpoint), classify(exc).message)
                answer = None
            answers.append(answer)
        return answers

    def refusing_for(self) -> float:
        """Seconds every circuit will still refuse a unit, as this process last found them
        (0: go ahead). Read before a job is claimed, so that a process does not claim jobs
        only to fail them at once while every server's circuit is open; it costs no Redis
        read, so a circuit another process opened is learnt by this process's next unit (one
        E309, uncharged), and one reset early by hand is tried at the end of the wait."""
        return max(0.0, self._refused_until - time.monotonic())

    def _on(self, endpoint: str, unit: Callable[[McpClient], T]) -> T:
        """The unit on ``endpoint``'s client; the handshake counts as part of the call."""
        return unit(self.pool.ready_client(endpoint))

    def breakers(self) -> list[dict[str, Any]]:
        """Each origin's circuit: state, failures, time to reset (for ping --json and stats)."""
        return [b.snapshot() for b in self.pool.breakers()]

    def close(self) -> None:
        self.pool.close()
        if self._redis is not None:
            self._redis.close()


def build_resilient(
    mcp_settings: McpSettings | None = None,
    settings: ResilienceSettings | None = None,
    *,
    endpoints: list[str] | None = None,
    client_factory: Callable[[str], McpClient] | None = None,
    first_origin: int = 0,
) -> Resilient:
    """Compose the pool from settings: ``DOCLING_MCP_ORIGIN`` may list several origins.

    ``first_origin``: where the pool's round starts (a worker passes its process index)."""
    mcp = mcp_settings if mcp_settings is not None else McpSettings.from_environment()
    res = settings if settings is not None else ResilienceSettings.from_environment()
    shared = redis_for_breakers(res)

    factory = client_factory or (lambda endpoint: McpClient(endpoint, settings=mcp))
    pool = ServerPool(
        endpoints or mcp.endpoints,
        factory,
        lambda origin: origin_breaker(origin, res, shared),
        first=first_origin,
        in_flight=InFlight(
            shared,
            namespace=res.breaker_namespace,
            ttl_s=res.in_flight_ttl_s,
            retry_s=res.breaker_redis_retry_s,
            where=f"Redis at {mask_address(res.redis_url)}",
        ),
    )
    return Resilient(pool, res, redis_client=shared)
