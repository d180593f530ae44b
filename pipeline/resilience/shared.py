"""What every process that reads the fleet's breakers needs, without the MCP client: the Redis
client they share and one origin's breaker as the settings make it.

The workers' resilience layer (``facade``) builds on these; the admin views (``doclane stats``,
``/metrics``) use them alone, so that reading the breakers does not load the MCP client.
"""

from __future__ import annotations

import logging

from pipeline.support.secrets import mask_address

from .breaker import OriginBreaker
from .settings import ResilienceSettings
from .storage import BreakerRedis, breaker_redis

log = logging.getLogger("doclane.resilience")


def redis_for_breakers(settings: ResilienceSettings) -> BreakerRedis | None:
    """The Redis client that shares breaker state (None when no Redis is configured).

    It connects lazily: an unreachable Redis is found, logged and tried again by each
    origin's storage, so a worker that starts before Redis still joins the fleet's state later.
    """
    if not settings.redis_url.strip():
        log.warning("no DOCLANE_REDIS_URL: circuit breakers live in per-process memory only")
        return None
    return breaker_redis(settings.redis_url)


def origin_breaker(
    origin: str, settings: ResilienceSettings, shared: BreakerRedis | None
) -> OriginBreaker:
    """The breaker of one origin as the settings make it (state in ``shared`` Redis)."""
    return OriginBreaker(
        origin,
        fail_max=settings.breaker_fail_max,
        reset_s=settings.breaker_reset_s,
        trial_ttl_s=settings.breaker_trial_ttl_s,
        redis_client=shared,
        namespace=settings.breaker_namespace,
        redis_retry_s=settings.breaker_redis_retry_s,
        redis_where=f"Redis at {mask_address(settings.redis_url)}",
    )
