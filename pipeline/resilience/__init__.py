"""Resilience: retry outside, a fleet-wide circuit breaker inside, over a pool of servers.

::

    from pipeline.resilience import build_resilient

    with build_resilient() as resilient:
        markdown = resilient.run(lambda client: convert_and_export(client, source))

Errors leave as catalog errors; E309 (``CircuitOpen``) carries ``retry_after`` so a caller such
as Celery can reschedule without spending an attempt. ``resilient.breakers()`` reads each
origin's circuit (state, failures, time to reset, fleet-wide transition counts). Names are
imported on first use (:mod:`pipeline.support.lazy`): a publisher reads ``ResilienceSettings``
without loading pybreaker and redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from .breaker import OriginBreaker
    from .facade import Resilient, build_resilient
    from .pool import ServerPool
    from .retry import RetryRecord, gives_up, retry_call
    from .settings import ResilienceSettings
    from .shared import origin_breaker, redis_for_breakers
    from .storage import FailoverStorage

__getattr__ = lazy.exports(
    __name__,
    {
        "FailoverStorage": ".storage",
        "OriginBreaker": ".breaker",
        "ResilienceSettings": ".settings",
        "Resilient": ".facade",
        "RetryRecord": ".retry",
        "ServerPool": ".pool",
        "build_resilient": ".facade",
        "gives_up": ".retry",
        "origin_breaker": ".shared",
        "redis_for_breakers": ".shared",
        "retry_call": ".retry",
    },
)

__all__ = [
    "FailoverStorage",
    "OriginBreaker",
    "ResilienceSettings",
    "Resilient",
    "RetryRecord",
    "ServerPool",
    "build_resilient",
    "gives_up",
    "origin_breaker",
    "redis_for_breakers",
    "retry_call",
]
