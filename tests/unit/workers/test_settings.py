"""Celery limits derived from the size tiers, and the broker visibility timeout above them."""

from __future__ import annotations

import pytest

from pipeline.queues import CONTROL_QUEUE
from pipeline.settings.tree import read_settings
from workers.settings import TimeLimits


def limits(**worker: object) -> TimeLimits:
    return TimeLimits(
        mcp=read_settings(
            mcp=dict(timeout_small_s=60, timeout_medium_s=180, timeout_large_s=300)
        ).mcp,
        resilience=read_settings(
            resilience=dict(retry_max_tries=3, retry_base_s=1, retry_max_s=30)
        ).resilience,
        sources=read_settings(sources=dict(download_timeout_s=120)).sources,
        processing=read_settings(processing=dict(job_retry_max_s=600)).processing,
        reconcile=read_settings().reconcile,
        worker=read_settings(worker=worker).worker,
    )


def test_limits_grow_with_the_tier_and_hard_exceeds_soft() -> None:
    t = limits()
    small, medium, large = (t.for_queue(f"doclane.{tier}") for tier in ("small", "medium", "large"))
    assert small[0] < medium[0] < large[0]
    for soft, hard in (small, medium, large):
        assert hard == soft + 30
    # three tries of two calls at the tier's timeout, plus the download and the backoff
    assert small[0] >= 3 * 2 * 60 + 120
    assert t.for_queue("something.else") == large


def test_visibility_timeout_is_above_the_longest_hard_limit_plus_countdown() -> None:
    t = limits()
    assert t.visibility_timeout() > t.hard("large") + 600
    assert limits(visibility_timeout_s=10).visibility_timeout() == t.visibility_timeout()
    assert limits(visibility_timeout_s=99999).visibility_timeout() == 99999


def test_queues_come_comma_separated_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCLANE_WORKER_QUEUES", "doclane.large, doclane.control")
    assert read_settings().worker.worker_queues == ("doclane.large", CONTROL_QUEUE)
