"""Requests per caller, counted in Redis so that every API process shares one count.

``limits``' moving window (one sorted set per caller and rate in Redis, changed by one Lua
script a hit): a caller is its token's name, or a JWT's issuer and subject. Its rate is its
own (``DOCLANE_API_RATE_LIMITS``: ``ci-bulk=5/second``), its role's (``admin=100/second``), or
``DOCLANE_API_RATE_LIMIT``; none set, nothing is counted. Past it: 429 with ``Retry-After`` and
E122, which a client tells from the tenant's queue quota (E115, also 429) by its code.

Redis unreachable: the request is served (a rate limit protects the fleet from a flood, it is
not what decides who may call; refusing everyone while Redis is down would be worse), and the
failure is logged once a minute at most.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from functools import cache

from fastapi import Depends
from limits import RateLimitItem, parse
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter

from errors import RateLimited
from pipeline.api.auth import Caller, TokenRoles
from pipeline.settings.access import AccessSettings

log = logging.getLogger(__name__)

#: Where the counts live in Redis (``limits`` adds its own prefix after it).
KEY_PREFIX = "doclane-rate"
_WARN_EVERY_S = 60.0


class RateLimits:
    """The /v1 dependency :meth:`check` (a caller past its rate: E122), over ``redis_url``."""

    def __init__(self, settings: AccessSettings, redis_url: str) -> None:
        self._settings = settings
        self._limiter: MovingWindowRateLimiter | None = None
        if redis_url.strip() and (settings.api_rate_limit or settings.api_rate_limits):
            storage = RedisStorage(redis_url, key_prefix=KEY_PREFIX)
            self._limiter = MovingWindowRateLimiter(storage)
        self._warned_at = 0.0

    @property
    def active(self) -> bool:
        return self._limiter is not None

    def dependency(self, access: TokenRoles) -> Callable[..., None]:
        def check(caller: Caller = Depends(access.caller)) -> None:  # noqa: B008
            self.check(caller)

        return check

    def check(self, caller: Caller) -> None:
        if self._limiter is None:
            return
        rate = self._settings.rate_for(caller.name, caller.role)
        if not rate:
            return
        item = _item(rate)
        who = f"{caller.issuer} {caller.name}" if caller.issuer else caller.name
        try:
            if self._limiter.hit(item, who):
                return
            reset_at, _ = self._limiter.get_window_stats(item, who)
        except Exception as exc:  # redis-py raises many kinds; the request is served
            self._warn(exc)
            return
        wait = max(1, math.ceil(reset_at - time.time()))
        raise RateLimited(
            f"{caller.name!r} sent more than {rate} requests; try again in {wait} s",
            detail={"caller": caller.name, "rate": rate, "retry_after": wait},
            retry_after=wait,
        )

    def _warn(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("rate limits not counted: Redis did not answer (%s)", exc)


@cache
def _item(rate: str) -> RateLimitItem:
    return parse(rate)
