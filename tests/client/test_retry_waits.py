"""The wait between two tries (``retry_wait_s``), and when the policy gives up: the arithmetic
the retry tests against the real API (test_client_resilience.py, test_tenant_quota.py) rely on,
at its edges, without a network."""

from __future__ import annotations

import httpx
from doclane_client import QuotaExceeded, RetryPolicy, ServerError, Unavailable
from doclane_client._core import retry_wait_s

POLICY = RetryPolicy(attempts=8, total_s=120, initial_s=0.25, max_wait_s=15, max_retry_after_s=30)


def test_full_jitter_below_a_doubling_ceiling_capped() -> None:
    ceilings = [retry_wait_s(POLICY, tries, None, draw=lambda: 1.0) for tries in range(1, 10)]
    assert ceilings == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0]
    assert retry_wait_s(POLICY, 3, None, draw=lambda: 0.0) == 0.0
    assert retry_wait_s(POLICY, 3, None, draw=lambda: 0.5) == 0.5
    waits = [retry_wait_s(POLICY, 4, None) for _ in range(200)]
    assert all(0 <= w <= 2.0 for w in waits) and len(set(waits)) > 100  # random, not fixed


def test_retry_after_is_waited_exactly() -> None:
    assert retry_wait_s(POLICY, 1, 7.0) == 7.0
    assert retry_wait_s(POLICY, 6, 0.0) == 0.0


def test_what_is_retried_and_when_the_policy_gives_up() -> None:
    def wait(
        failure: Exception, tries: int = 1, elapsed_s: float = 0, get: bool = True
    ) -> float | None:
        return POLICY.wait_s(failure, tries=tries, elapsed_s=elapsed_s, idempotent=get)

    busy = Unavailable("http_503", "busy", status=503)
    assert wait(busy) is not None
    assert wait(busy, tries=8) is None  # the last of 8 tries
    assert wait(QuotaExceeded("E115", "full", status=429, retry_after=30)) == 30
    assert wait(QuotaExceeded("E115", "full", status=429, retry_after=31)) is None  # over the cap
    assert wait(QuotaExceeded("E115", "full", status=429, retry_after=30), elapsed_s=91) is None
    assert wait(ServerError("E399", "bug", status=500)) is None  # not transient
    refused = httpx.ConnectError("refused")
    cut = httpx.ReadError("cut off")
    assert wait(refused, get=False) is not None  # never reached the API: safe to send again
    assert wait(cut) is not None and wait(cut, get=False) is None  # a POST may have happened
