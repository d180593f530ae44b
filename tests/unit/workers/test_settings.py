"""Celery limits derived from the size tiers, and the broker visibility timeout above them."""

from __future__ import annotations

import pytest

from pipeline.mcp import load_mcp_settings
from pipeline.processing import load_processing_settings
from pipeline.queues import CONTROL_QUEUE
from pipeline.reconciler.sweeps import load_reconcile_settings
from pipeline.resilience import load_resilience_settings
from pipeline.sources import load_source_settings
from workers.settings import TimeLimits, load_worker_settings


def limits(**worker: object) -> TimeLimits:
    return TimeLimits(
        mcp=load_mcp_settings(timeout_small_s=60, timeout_medium_s=180, timeout_large_s=300),
        resilience=load_resilience_settings(retry_max_tries=3, retry_base_s=1, retry_max_s=30),
        sources=load_source_settings(download_timeout_s=120),
        processing=load_processing_settings(job_retry_max_s=600),
        reconcile=load_reconcile_settings(),
        worker=load_worker_settings(**worker),
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
    assert load_worker_settings().worker_queues == ("doclane.large", CONTROL_QUEUE)
