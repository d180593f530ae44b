"""Where an origin's circuit state lives: in Redis while it answers, in this process while not.

pybreaker's ``CircuitRedisStorage`` keeps the fleet's state (``state``, ``fail_counter``,
``opened_at`` under one namespace per origin), but it logs a traceback for every ``RedisError``
and then answers "closed, no failures": with Redis gone, every process would forget that a
server is sick and keep hammering it, and the log would fill with tracebacks. So the Redis
client handed to it (:class:`BreakerRedis`) raises :class:`RedisUnavailable` instead, which is
not a ``RedisError`` and passes through pybreaker untouched. :class:`FailoverStorage` catches it,
says once that the circuit now lives in this process's memory, and tries Redis again every
``retry_s``; once Redis answers, the fleet's state there wins and what this process counted
alone is dropped (Redis is the truth whenever it can be read).

The half-open trial token and the transition counts live here too, next to the state they
belong to: ``SET NX`` in Redis admits one trial across the fleet, a local token admits one per
process while the state is local.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import pybreaker
import redis

T = TypeVar("T")
log = logging.getLogger("doclane.resilience.storage")

CLOSED = pybreaker.STATE_CLOSED


class RedisUnavailable(Exception):
    """Redis did not answer (or, said by the admin views, none is configured): one name for
    every reader of the breakers and the heartbeats. Deliberately not a ``RedisError``:
    pybreaker would swallow that."""


class BreakerRedis(redis.Redis):
    """A Redis client whose failures reach doclane instead of being swallowed by pybreaker."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except redis.RedisError as exc:
            raise RedisUnavailable(str(exc)) from exc

    def transaction(self, func: Any, *watches: Any, **kwargs: Any) -> Any:
        try:
            return super().transaction(func, *watches, **kwargs)
        except redis.RedisError as exc:
            raise RedisUnavailable(str(exc)) from exc


def breaker_redis(url: str) -> BreakerRedis:
    """A client for breaker state: bytes, not decoded (pybreaker parses integers from bytes).

    It connects lazily; short timeouts, because every call of every conversion reads the state.
    """
    client = BreakerRedis.from_url(
        url, decode_responses=False, socket_connect_timeout=1.0, socket_timeout=2.0
    )
    return cast(BreakerRedis, client)


class FailoverStorage(pybreaker.CircuitBreakerStorage):
    """pybreaker storage of one origin: Redis when reachable, memory otherwise. Thread-safe."""

    def __init__(
        self,
        origin: str,
        client: BreakerRedis | None,
        *,
        namespace: str,
        retry_s: float,
        where: str = "Redis",
    ) -> None:
        super().__init__("failover")
        self.origin = origin
        self.namespace = namespace
        self._client = client
        self._retry_s = retry_s
        self._where = where
        self._memory = pybreaker.CircuitMemoryStorage(CLOSED)
        self._memory_transitions: Counter[str] = Counter()
        self._local_trial: str | None = None
        self._shared: pybreaker.CircuitRedisStorage | None = None
        self._next_connect = 0.0  # monotonic; when to try Redis again
        self._in_outage = False  # warned, and not yet back on Redis
        self._connecting = threading.Lock()
        self._lock = threading.Lock()  # the local trial token
        self._current()

    # ---- which storage ---------------------------------------------------------------------
    @property
    def shared(self) -> bool:
        """True while the state lives in Redis (shared by the fleet)."""
        return self._shared is not None

    def _current(self) -> pybreaker.CircuitBreakerStorage:
        shared = self._shared
        if shared is not None:
            return shared
        if self._client is None or time.monotonic() < self._next_connect:
            return self._memory
        if not self._connecting.acquire(blocking=False):
            return self._memory  # another thread is trying Redis right now
        try:
            if self._shared is None:
                self._connect(self._client)
        finally:
            self._connecting.release()
        return self._shared or self._memory

    def _connect(self, client: BreakerRedis) -> None:
        try:
            self._shared = pybreaker.CircuitRedisStorage(CLOSED, client, namespace=self.namespace)
        except RedisUnavailable as exc:
            self._next_connect = time.monotonic() + self._retry_s
            self._report_outage(exc)
            return
        if self._in_outage:
            self._in_outage = False
            log.warning(
                "circuit of %s: %s answers again; the fleet's shared breaker state applies",
                self.origin,
                self._where,
                extra={"origin": self.origin},
            )

    def _fall_back(self, exc: RedisUnavailable) -> None:
        with self._connecting:
            if self._shared is None:
                return
            self._shared = None
            self._next_connect = time.monotonic() + self._retry_s
            self._report_outage(exc)

    def _report_outage(self, exc: Exception) -> None:
        """Warn once per outage, not once per call."""
        if self._in_outage:
            return
        self._in_outage = True
        log.warning(
            "circuit of %s: %s unreachable (%s); breaker state falls back to per-process "
            "memory, Redis tried again every %.0fs",
            self.origin,
            self._where,
            exc,
            self._retry_s,
            extra={"origin": self.origin},
        )

    def _do(self, op: Callable[[pybreaker.CircuitBreakerStorage], T]) -> T:
        storage = self._current()
        if storage is self._memory:
            return op(storage)
        try:
            return op(storage)
        except RedisUnavailable as exc:
            self._fall_back(exc)
            return op(self._memory)

    # ---- pybreaker's storage interface ---------------------------------------------------
    @property
    def state(self) -> str:
        return self._do(lambda s: s.state)

    @state.setter
    def state(self, state: str) -> None:
        self._put("state", state)

    def increment_counter(self) -> None:
        self._do(lambda s: s.increment_counter())

    def reset_counter(self) -> None:
        self._do(lambda s: s.reset_counter())

    def increment_success_counter(self) -> None:
        self._do(lambda s: s.increment_success_counter())

    def reset_success_counter(self) -> None:
        self._do(lambda s: s.reset_success_counter())

    @property
    def counter(self) -> int:
        return self._do(lambda s: s.counter)

    @property
    def success_counter(self) -> int:
        return self._do(lambda s: s.success_counter)

    @property
    def opened_at(self) -> datetime | None:
        return self._do(lambda s: s.opened_at)

    @opened_at.setter
    def opened_at(self, now: datetime) -> None:
        self._put("opened_at", now)

    def _put(self, name: str, value: object) -> None:
        """Set one of pybreaker's attributes where the state lives now (Redis, or memory)."""
        self._do(lambda s: setattr(s, name, value))

    # ---- beyond pybreaker ------------------------------------------------------------------
    def peek(self) -> tuple[str, int]:
        """The state and the failure count in one read: one round trip while shared.

        Every conversion asks both (may it go? is there a count to reset after it?); read
        apart, they were two Redis round trips per job, 6% of a worker's CPU against a fast
        server. A state Redis lost (a flushed database) is left to pybreaker's own
        read, which puts it back.
        """

        def read(s: pybreaker.CircuitBreakerStorage) -> tuple[str, int]:
            if s is self._memory:
                return s.state, s.counter
            assert self._client is not None
            state, failures = self._client.mget(self._peek_keys())
            if state is None:
                return s.state, s.counter
            return _text(state), int(failures or 0)

        return self._do(read)

    def _peek_keys(self) -> list[str]:
        return [self._shared_key("state"), self._shared_key("fail_counter")]

    def opened_no_later_than(self) -> float | None:
        """Epoch seconds by which the circuit had surely opened (Redis keeps whole seconds)."""

        def read(s: pybreaker.CircuitBreakerStorage) -> float | None:
            opened = s.opened_at
            if opened is None:
                return None
            return opened.timestamp() + (1.0 if s is not self._memory else 0.0)

        return self._do(read)

    def claim_trial(self, token: str, ttl_ms: int) -> bool:
        """Whether ``token`` became the one half-open trial (fleet-wide while shared)."""

        def claim(s: pybreaker.CircuitBreakerStorage) -> bool:
            if s is self._memory:
                with self._lock:
                    if self._local_trial is not None:
                        return False
                    self._local_trial = token
                    return True
            assert self._client is not None
            return bool(self._client.set(self._key("trial"), token, nx=True, px=ttl_ms))

        return self._do(claim)

    def release_trial(self, token: str) -> None:
        """Let the next call be the trial; a token that is no longer ours is left alone."""
        with self._lock:
            if self._local_trial == token:
                self._local_trial = None
                return
        if self._client is None or self._shared is None:
            return
        try:
            key = self._key("trial")
            if self._client.get(key) == token.encode():
                self._client.delete(key)
        except RedisUnavailable as exc:  # the token expires by itself
            self._fall_back(exc)

    def count_transition(self, entered: str) -> None:
        """Count a state this process moved the circuit into (fleet-wide sums in Redis)."""

        def count(s: pybreaker.CircuitBreakerStorage) -> None:
            if s is self._memory:
                self._memory_transitions[entered] += 1
            else:
                assert self._client is not None
                self._client.hincrby(self._key("transitions"), entered, 1)

        self._do(count)

    def transitions(self) -> dict[str, int]:
        """How often the circuit entered each state: the fleet's count while shared."""

        def read(s: pybreaker.CircuitBreakerStorage) -> dict[str, int]:
            if s is self._memory:
                return dict(self._memory_transitions)
            assert self._client is not None
            raw = self._client.hgetall(self._key("transitions"))
            return {_text(k): int(v) for k, v in raw.items()}

        return self._do(read)

    def _key(self, name: str) -> str:
        return f"{self.namespace}:{name}"

    def _shared_key(self, name: str) -> str:
        """A key of pybreaker's own (``CircuitRedisStorage`` names them so)."""
        return f"{self.namespace}:{pybreaker.CircuitRedisStorage.BASE_NAMESPACE}:{name}"


def peek_all(storages: Sequence[FailoverStorage]) -> list[tuple[str, int]]:
    """What :meth:`FailoverStorage.peek` tells of each storage, in one round trip for all of
    those that live in one Redis now.

    A unit that chooses among N origins reads every circuit first; read one by one, that was N
    round trips and then the chosen breaker's own: here a round trip costs about 0.13 ms and
    0.08 ms of CPU, and a pool of four servers spent 1 ms of every unit choosing.
    A Redis that does not answer sends every storage read here to its memory, as a
    failed read of its own would; a state Redis lost is left to that storage's own read, which
    puts it back.
    """
    client: BreakerRedis | None = None
    together: list[tuple[int, FailoverStorage]] = []
    for i, storage in enumerate(storages):
        if storage._current() is storage._memory:
            continue
        if client is None or storage._client is client:
            client = storage._client
            together.append((i, storage))
    read: dict[int, tuple[str, int]] = {}
    if client is not None and len(together) > 1:
        keys = [key for _, storage in together for key in storage._peek_keys()]
        try:
            values = client.mget(keys)
        except RedisUnavailable as exc:
            for _, storage in together:
                storage._fall_back(exc)
        else:
            for n, (i, _) in enumerate(together):
                state, failures = values[2 * n], values[2 * n + 1]
                if state is not None:
                    read[i] = (_text(state), int(failures or 0))
    return [read[i] if i in read else storage.peek() for i, storage in enumerate(storages)]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
