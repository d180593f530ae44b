"""Settings of the resilience layer: how patient retry is and how quickly the breaker trips."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from pipeline.support.settings import Section


class ResilienceSettings(Section):
    """Read once per process; every MCP caller (workers, ``doclane mcp``) shares these."""

    # An empty DOCLANE_REDIS_URL is a value: no Redis at all.
    model_config = SettingsConfigDict(env_ignore_empty=False)

    #: Tries of one unit of work, the first included (1 = no retry).
    retry_max_tries: int = Field(default=3, ge=1)
    #: First backoff ceiling; later ones double (1 s, 2 s, 4 s ...), each with full jitter.
    retry_base_s: float = Field(default=1.0, gt=0)
    #: No backoff ceiling grows beyond this.
    retry_max_s: float = Field(default=30.0, gt=0)
    #: Consecutive server-side failures (E204, E302, E303, E308) that open an origin's circuit.
    breaker_fail_max: int = Field(default=5, ge=1)
    #: How long an open circuit refuses calls before it lets one trial through.
    breaker_reset_s: float = Field(default=30.0, gt=0)
    #: How long one process may hold the half-open trial before another may try (a crashed
    #: trial holder must not keep the circuit half-open forever).
    breaker_trial_ttl_s: float = Field(default=330.0, gt=0)
    #: Redis key prefix of the shared breaker state and of the units in flight on each
    #: origin; one namespace per origin below it.
    breaker_namespace: str = "doclane:breaker"
    #: Where the fleet-wide breaker state and in-flight counts live; unreachable Redis falls
    #: back to memory. Empty: no Redis at all, every process keeps its own breakers and
    #: counts (development only).
    redis_url: str = "redis://127.0.0.1:6379/0"
    #: While Redis is unreachable, how often a process tries it again (then the fleet's
    #: shared breaker state and in-flight counts apply again).
    breaker_redis_retry_s: float = Field(default=30.0, gt=0)
    #: With several origins, each unit goes to the one with the fewest units in flight across
    #: the fleet (counted in Redis). A process killed mid-unit leaves its count behind for this
    #: long; a unit that runs longer is no longer counted. Default: the longest call (300 s)
    #: plus a margin.
    in_flight_ttl_s: float = Field(default=330.0, gt=0)
