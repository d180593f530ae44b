"""One circuit breaker per Docling server origin, shared by every process through Redis.

pybreaker keeps the state (closed / open / half-open, the failure count, when it opened) in its
``CircuitRedisStorage`` and tells listeners about changes; this module decides *when* a call may
go and what its outcome means. Three things in pybreaker's own ``call()`` do not fit a fleet:

- it holds one lock for the whole wrapped call, which would serialise every conversion of a
  worker's thread pool through one breaker: here the lock is never held while the call runs;
- it counts an ``exclude``d error as a success, so a stream of bad documents would keep
  resetting the failure count of a server that is timing out on everything else: here only
  server-side trouble (the catalog's ``trips_breaker``: E204, E302, E303, E308) counts as a
  failure, only a real success resets the count, and any other error counts as neither;
- its half-open state lets every process that notices the elapsed timeout send a trial: here a
  Redis ``SET NX`` token admits exactly one trial across the fleet (one per process when Redis is
  unreachable and the state falls back to memory).

Where the state lives, and what happens when Redis goes away, is :mod:`.storage`'s business.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import pybreaker

from errors import CircuitOpen, classify

from .storage import BreakerRedis, FailoverStorage

T = TypeVar("T")
log = logging.getLogger("doclane.resilience.breaker")

CLOSED, OPEN, HALF_OPEN = pybreaker.STATE_CLOSED, pybreaker.STATE_OPEN, pybreaker.STATE_HALF_OPEN


class _StateLog(pybreaker.CircuitBreakerListener):
    """Logs and counts the state changes this process makes (the fleet's sum lives in storage).

    It names the state entered, not pybreaker's "previous" state: that is this process's cached
    view, which is stale whenever another process moved the circuit in between.
    """

    def __init__(self, origin: str, storage: FailoverStorage) -> None:
        self.origin = origin
        self.storage = storage
        self.entered: Counter[str] = Counter()

    def state_change(self, cb: Any, old_state: Any, new_state: Any) -> None:
        entered = getattr(new_state, "name", None) or "none"
        self.entered[entered] += 1
        self.storage.count_transition(entered)
        level = logging.INFO if entered == HALF_OPEN else logging.WARNING
        log.log(
            level, "circuit of %s is now %s", self.origin, entered, extra={"origin": self.origin}
        )


class OriginBreaker:
    """The breaker of one origin. Thread-safe; share one per origin in a process."""

    def __init__(
        self,
        origin: str,
        *,
        fail_max: int,
        reset_s: float,
        trial_ttl_s: float,
        redis_client: BreakerRedis | None,
        namespace: str,
        redis_retry_s: float = 30.0,
        redis_where: str = "Redis",
    ) -> None:
        self.origin = origin
        self.fail_max = fail_max
        self.reset_s = reset_s
        self._trial_ttl_ms = max(1, int(trial_ttl_s * 1000))
        self.storage = FailoverStorage(
            origin,
            redis_client,
            namespace=f"{namespace}:{origin}",
            retry_s=redis_retry_s,
            where=redis_where,
        )
        self._listener = _StateLog(origin, self.storage)
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=fail_max,
            reset_timeout=reset_s,
            state_storage=self.storage,
            listeners=[self._listener],
            name=origin,
        )
        self._lock = threading.Lock()  # held for bookkeeping only, never during a call

    @property
    def shared(self) -> bool:
        """Whether the state is shared through Redis right now (False: in-process fallback)."""
        return self.storage.shared

    # ---- the call ----------------------------------------------------------------------
    def call(self, func: Callable[[], T], *, circuit: tuple[str, int] | None = None) -> T:
        """Run ``func`` if the circuit admits it; E309 without running it otherwise.

        A closed circuit costs one read (state and failure count together) and, after a
        success, a write only when there was a count to reset. ``circuit``: that read, when
        the caller has just made it (a pool reads every origin's circuit at once to choose).
        """
        state, failures = circuit if circuit is not None else self.storage.peek()
        trial = None if state == CLOSED else self._admit()
        try:
            result = func()
        except BaseException as exc:
            if classify(exc).trips_breaker:
                self._record_failure(trial)
            elif trial is not None:
                self.storage.release_trial(trial)  # neither outcome: the next call may be the trial
            raise
        if trial is not None or failures:
            self._record_success(trial)
        return result

    def _admit(self) -> str | None:
        """After a read that found the circuit not closed: None if it is closed after all, a
        trial token for the one half-open trial; else E309."""
        with self._lock:
            state = self._breaker.current_state
            if state == CLOSED:
                return None
            if state == OPEN:
                wait = self.retry_after()
                if wait > 0:
                    raise CircuitOpen(
                        f"circuit of {self.origin} is open; next trial in {wait:.1f}s",
                        retry_after=wait,
                        detail={"origin": self.origin},
                    )
            trial = uuid.uuid4().hex
            if not self.storage.claim_trial(trial, self._trial_ttl_ms):
                raise CircuitOpen(
                    f"circuit of {self.origin} is half-open and its one trial call is running",
                    retry_after=min(self.reset_s, 5.0),
                    detail={"origin": self.origin},
                )
            if state == OPEN:
                self._breaker.half_open()
            log.info("circuit of %s: sending the half-open trial call", self.origin)
            return trial

    def _record_failure(self, trial: str | None) -> None:
        with self._lock:
            if trial is not None:
                self._breaker.open()  # the trial failed: open again for a full reset period
                self.storage.release_trial(trial)
                return
            self.storage.increment_counter()
            if self.storage.counter >= self.fail_max and self._breaker.current_state != OPEN:
                self._breaker.open()

    def _record_success(self, trial: str | None) -> None:
        with self._lock:
            if trial is not None:
                self._breaker.close()  # resets the failure count too
                self.storage.release_trial(trial)
            else:
                self.storage.reset_counter()

    # ---- what admins read ----------------------------------------------------------------
    def retry_after(self) -> float:
        """Seconds until an open circuit lets a trial through (0 when not open)."""
        if self._breaker.current_state != OPEN:
            return 0.0
        opened = self.storage.opened_no_later_than()
        if opened is None:
            return 0.0
        return max(0.0, opened + self.reset_s - datetime.now(UTC).timestamp())

    def is_open(self, state: str | None = None) -> bool:
        """Whether calls are refused now; ``state``: the circuit's state as just read."""
        if (self._breaker.current_state if state is None else state) != OPEN:
            return False
        return self.retry_after() > 0

    def snapshot(self) -> dict[str, Any]:
        """State, failure count and time to reset, as ``doclane mcp ping --json`` shows them."""
        return {
            "origin": self.origin,
            "state": self._breaker.current_state,
            "failures": self.storage.counter,
            "fail_max": self.fail_max,
            "reset_s": self.reset_s,
            "retry_after_s": round(self.retry_after(), 3),
            "shared": self.shared,
            # how often the circuit entered each state: the fleet's sums while shared
            "transitions": self.storage.transitions(),
            "transitions_here": dict(self._listener.entered),
            "read_at": time.time(),
        }

    def reset(self) -> None:
        """Close the circuit by hand (an operator who knows the server is back)."""
        with self._lock:
            self._breaker.close()
