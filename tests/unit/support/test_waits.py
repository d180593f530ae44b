"""The one recipe of doclane's waits: ceilings that double from the first up to the cap, each
wait drawn below its ceiling, and the library's loop waiting those waits."""

from __future__ import annotations

import pytest

from pipeline.support import waits
from pipeline.support.waits import Backoff, half_jitter


def test_the_ceilings_double_from_the_first_up_to_the_cap() -> None:
    recipe = Backoff(first_s=5, max_s=60)
    assert [recipe.ceiling(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert recipe.ceiling(0) == 5, "no failure yet waits as the first does"
    assert recipe.ceiling(10_000) == 60, "far past the cap, still the cap"
    assert Backoff(first_s=90, max_s=60).ceiling(1) == 60, "a first wait above the cap is capped"


def test_a_wait_is_drawn_below_its_ceiling_by_the_jitter() -> None:
    halves = {Backoff(4, 60, half_jitter).wait(3) for _ in range(200)}
    assert all(8 <= w <= 16 for w in halves) and len(halves) > 1
    fulls = {Backoff(4, 60).wait(3) for _ in range(200)}
    assert all(0 <= w <= 16 for w in fulls) and min(fulls) < 8, "full jitter reaches below half"


def test_the_library_loop_waits_the_recipes_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry in place waits the same ceilings (recorded through the jitter, not slept)."""
    ceilings: list[float] = []
    slept: list[float] = []
    monkeypatch.setattr("backoff._sync.time.sleep", slept.append)
    recipe = Backoff(first_s=0.5, max_s=3, jitter=lambda c: ceilings.append(c) or c)
    failures = iter([OSError("1"), OSError("2"), OSError("3"), OSError("4"), None])

    @recipe.on_exception(OSError, max_tries=6)
    def flaky() -> str:
        failure = next(failures)
        if failure is not None:
            raise failure
        return "done"

    assert flaky() == "done"
    assert ceilings == [0.5, 1, 2, 3] == [recipe.ceiling(n) for n in range(1, 5)]
    assert slept == ceilings


def test_half_jitter_never_waits_nothing() -> None:
    assert min(half_jitter(2.0) for _ in range(200)) >= 1.0
    assert waits.full_jitter(0.0) == 0.0
