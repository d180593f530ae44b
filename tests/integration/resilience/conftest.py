"""Redis clients as the breakers and in-flight counts use them, one per simulated process."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pipeline.resilience.storage import BreakerRedis, breaker_redis
from tests.support.shared_redis import SHARED_REDIS


@pytest.fixture
def clients() -> Iterator[Callable[[str], BreakerRedis]]:
    """Make a client (the machine's Redis unless a URL is given); all are closed afterwards."""
    made: list[BreakerRedis] = []

    def make(url: str = SHARED_REDIS) -> BreakerRedis:
        made.append(breaker_redis(url))
        return made[-1]

    yield make
    for client in made:
        client.close()
