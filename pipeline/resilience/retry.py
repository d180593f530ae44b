"""Exponential retry with full jitter, deciding by the error catalog and nothing else.

The ``backoff`` library does the waiting; this module only tells it when to give up: at once
for anything the catalog says is not retryable, and at once for an open circuit (E309), because
waiting out a breaker's reset inside a worker would hold the worker hostage: the caller (Celery)
reschedules after ``retry_after`` instead, without spending an attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import backoff

from errors import PipelineError, classify

from .settings import ResilienceSettings

T = TypeVar("T")
log = logging.getLogger("doclane.resilience.retry")


def gives_up(exc: Exception) -> bool:
    """True when another try cannot help: a final error, or an open circuit."""
    error = classify(exc)
    return not error.retryable or error.code == "E309"


@dataclass
class RetryRecord:
    """What happened to one unit of work, try by try: for logs, job events and tests."""

    tries: int = 0
    #: Per failed try that was followed by a wait: (error code, backoff ceiling, actual wait).
    waits: list[tuple[str, float, float]] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)


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
    rec = record if record is not None else RetryRecord()
    ceilings: list[float] = []

    def jitter(ceiling: float) -> float:
        ceilings.append(ceiling)
        return float(backoff.full_jitter(ceiling))

    def on_backoff(details: Any) -> None:
        error = classify(details["exception"])
        wait = float(details["wait"])
        ceiling = ceilings[-1] if ceilings else wait
        rec.waits.append((error.code, ceiling, wait))
        log.warning(
            "%s: try %d failed with %s (%s); waiting %.2fs (ceiling %.2fs)",
            label,
            details["tries"],
            error.code,
            error.message,
            wait,
            ceiling,
            extra={"error_code": error.code, "wait_s": wait, "try": details["tries"]},
        )

    def on_giveup(details: Any) -> None:
        error = classify(details["exception"])
        why = "not retryable" if gives_up(details["exception"]) else "out of tries"
        log.warning(
            "%s: giving up after try %d with %s (%s, %s)",
            label,
            details["tries"],
            error.code,
            error.message,
            why,
            extra={"error_code": error.code, "try": details["tries"]},
        )

    def attempt() -> T:
        rec.tries += 1
        try:
            return func()
        except Exception as exc:
            rec.codes.append(classify(exc).code)
            raise

    retrying = backoff.on_exception(
        backoff.expo,
        Exception,
        max_tries=settings.retry_max_tries,
        jitter=jitter,
        giveup=gives_up,
        on_backoff=on_backoff,
        on_giveup=on_giveup,
        logger=None,
        factor=settings.retry_base_s,
        max_value=settings.retry_max_s,
    )(attempt)
    try:
        return retrying()
    except PipelineError:
        raise
    except Exception as exc:
        raise classify(exc) from exc
