"""Exponential, jittered waits between tries: the one recipe every retry of doclane follows.

The ceilings are the ``backoff`` library's (:func:`backoff.expo`: the first wait, doubled after
each failure, capped); each wait is drawn below its ceiling by a jitter, so that the many who
failed together do not all come back at once. A retry in place (a call tried again while the
caller waits) runs in the library's own loop (:meth:`Backoff.on_exception`); a retry that comes
back later (a job's next attempt, a webhook's next try) takes one wait to schedule itself with
(:meth:`Backoff.wait`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import backoff

T = TypeVar("T")


def half_jitter(ceiling: float) -> float:
    """Between half and all of ``ceiling``: spread out, never immediately."""
    return round(random.uniform(ceiling / 2.0, ceiling), 3)


def full_jitter(ceiling: float) -> float:
    """Anywhere below ``ceiling`` (the library's "full jitter")."""
    return float(backoff.full_jitter(ceiling))


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits of ``first_s``, doubling after each failure up to ``max_s``, drawn by ``jitter``."""

    first_s: float
    max_s: float
    jitter: Callable[[float], float] = full_jitter

    def ceiling(self, failures: int) -> float:
        """The ceiling of the wait after the ``failures``-th failure in a row (from 1)."""
        return next(itertools.islice(self._ceilings(), max(failures, 1) - 1, None))

    def wait(self, failures: int) -> float:
        """The wait after the ``failures``-th failure in a row: below its ceiling, jittered."""
        return self.jitter(self.ceiling(failures))

    def on_exception(
        self, exception: type[Exception], **options: Any
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """A decorator that calls again after these waits while the call raises ``exception``
        (``options``: the library's ``max_tries``, ``max_time``, ``giveup`` and hooks)."""
        decorate: Callable[[Callable[..., T]], Callable[..., T]] = backoff.on_exception(
            backoff.expo,
            exception,
            jitter=self.jitter,
            logger=None,
            factor=self.first_s,
            max_value=self.max_s,
            **options,
        )
        return decorate

    def _ceilings(self) -> Generator[float, Any, None]:
        ceilings = backoff.expo(factor=self.first_s, max_value=self.max_s)
        next(ceilings)  # the generator's first value only primes it (the library skips it too)
        return ceilings
