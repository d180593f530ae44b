"""Exponential retry with full jitter, deciding by the error catalog and nothing else.

The ``backoff`` library does the waiting (through :mod:`pipeline.support.waits`, the one
recipe of doclane's waits); this module only tells it when to give up: at once
for anything the catalog says is not retryable, and at once for an open circuit (E309,
:class:`errors.CircuitOpen`), because waiting out a breaker's reset inside a worker would hold
the worker hostage: the caller (Celery) reschedules after ``retry_after`` instead, without
spending an attempt.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from errors import CircuitOpen, PipelineError, classify
from pipeline.support.waits import Backoff, full_jitter

from .settings import ResilienceSettings

T = TypeVar("T")
log = logging.getLogger("doclane.resilience.retry")


def gives_up(exc: Exception) -> bool:
    """True when another try cannot help: a final error, or an open circuit."""
    error = classify(exc)
    return not error.retryable or isinstance(error, CircuitOpen)


@dataclass
class RetryRecord:
    """What happened to one unit of work, try by try: for logs, job events and tests."""

    tries: int = 0
    #: Per failed try that was followed by a wait: (error code, backoff ceiling, actual wait).
    waits: list[tuple[str, float, float]] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    #: Whether any try reached a server: every try does but one refused by an open circuit
    #: (:class:`errors.CircuitOpen`), which was answered before anything was sent. A job whose
    #: tries all met open circuits was never tried, so its attempt is not charged.
    reached_server: bool = False

    def try_ended(self, error: PipelineError | None) -> None:
        """The try counted in ``tries`` ended in ``error`` (``None``: it succeeded)."""
        if error is not None:
            self.codes.append(error.code)
        if not isinstance(error, CircuitOpen):
            self.reached_server = True


def retry_call(
    func: Callable[[], T],
    settings: ResilienceSettings,
    *,
    label: str = "call",
    record: RetryRecord | None = None,
) -> T:
    """Call ``func`` up to ``retry_max_tries`` times; raise the last catalog error.

    Waits are full-jitter draws below ceilings of base, 2·base, 4·base ... (capped at
    ``retry_max_s``). A foreign exception that escapes ``func`` leaves as its catalog error.
    """
    trace = _Trace(record if record is not None else RetryRecord(), label)
    waits = Backoff(settings.retry_base_s, settings.retry_max_s, jitter=trace.jitter)
    retrying = waits.on_exception(
        Exception,
        max_tries=settings.retry_max_tries,
        giveup=gives_up,
        on_backoff=trace.on_backoff,
        on_giveup=trace.on_giveup,
    )(functools.partial(trace.one_try, func))
    try:
        return retrying()
    except PipelineError:
        raise
    except Exception as exc:
        raise classify(exc) from exc


class _Trace:
    """``backoff``'s hooks for one :func:`retry_call`: each try counted in the record, each wait
    recorded with the ceiling its jitter was drawn below, and both logged."""

    def __init__(self, record: RetryRecord, label: str) -> None:
        self.record = record
        self.label = label
        self.ceilings: list[float] = []

    def one_try(self, func: Callable[[], T]) -> T:
        self.record.tries += 1
        try:
            result = func()
        except Exception as exc:
            self.record.try_ended(classify(exc))
            raise
        self.record.try_ended(None)
        return result

    def jitter(self, ceiling: float) -> float:
        self.ceilings.append(ceiling)
        return full_jitter(ceiling)

    def on_backoff(self, details: Any) -> None:
        error = classify(details["exception"])
        wait = float(details["wait"])
        ceiling = self.ceilings[-1] if self.ceilings else wait
        self.record.waits.append((error.code, ceiling, wait))
        log.warning(
            "%s: try %d failed with %s (%s); waiting %.2fs (ceiling %.2fs)",
            self.label,
            details["tries"],
            error.code,
            error.message,
            wait,
            ceiling,
            extra={"error_code": error.code, "wait_s": wait, "try": details["tries"]},
        )

    def on_giveup(self, details: Any) -> None:
        error = classify(details["exception"])
        why = "not retryable" if gives_up(details["exception"]) else "out of tries"
        log.warning(
            "%s: giving up after try %d with %s (%s, %s)",
            self.label,
            details["tries"],
            error.code,
            error.message,
            why,
            extra={"error_code": error.code, "try": details["tries"]},
        )
