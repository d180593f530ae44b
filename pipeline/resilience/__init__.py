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
    from .breaker import OriginBreaker as OriginBreaker
    from .facade import Resilient as Resilient
    from .facade import build_resilient as build_resilient
    from .pool import ServerPool as ServerPool
    from .retry import RetryRecord as RetryRecord
    from .retry import gives_up as gives_up
    from .retry import retry_call as retry_call
    from .settings import ResilienceSettings as ResilienceSettings
    from .shared import origin_breaker as origin_breaker
    from .shared import redis_for_breakers as redis_for_breakers
    from .storage import FailoverStorage as FailoverStorage

if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
