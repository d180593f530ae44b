"""Units of work in flight on each origin, counted across the fleet, so the pool can send each
unit to the origin where the fewest are.

Each process keeping its own round-robin over the origins does not spread a fleet's work: Celery
hands each job to whichever process is free, the processes' rounds drift out of step, and they
collide on one server's slots while another idles (docs/benchmarks.md's scale-out runs: 0.39-0.85
of linear with two and four servers). So the count lives in Redis beside the breakers: one sorted
set per origin (``<breaker namespace>:<origin>:in_flight``) whose members are leases
(``host:pid:n``) scored by the time they expire, on Redis's clock (hosts' clocks may disagree).

Choosing is one round trip: a Lua script drops the candidates' expired leases, picks the one with
the fewest and adds a lease there, atomically, so processes choosing at the same moment never
all take the same free origin (one-process workers on many hosts, all with pool index 0, spread
as the processes of one worker do). A unit's end removes its lease: a second round trip. A
process killed mid-unit leaves its lease behind until it expires, ``ttl_s`` after the unit began
(by default the longest single call plus a margin); a unit that runs longer than that is not
counted any more, which makes the next choices a little worse and nothing else. The set itself
expires with its last lease, so origins taken out of the configuration leave no keys behind.

While Redis does not answer, this process's own counts decide (with one unit at a time per
prefork process, that is the pool's round-robin), as the breakers fall back to memory in
:mod:`.storage`: a warning once per outage, Redis tried again every ``retry_s``.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from .storage import BreakerRedis, RedisUnavailable

log = logging.getLogger("doclane.resilience.in_flight")

#: KEYS: the candidates' lease sets, in order of preference (a tie goes to the first).
#: ARGV: the new lease's member, its time to live in ms. Returns the chosen key's place (1-based).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local best, fewest = 1, nil
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local n = redis.call('ZCARD', key)
  if fewest == nil or n < fewest then best, fewest = i, n end
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[best], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[best], ttl)
return best
"""

#: KEYS: lease sets. Returns how many leases of each have not expired.
_COUNT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('ZCOUNT', key, '(' .. now, '+inf')
end
return counts
"""

_SHA = {body: hashlib.sha1(body.encode()).hexdigest() for body in (_TAKE, _COUNT)}


@dataclass(frozen=True)
class Lease:
    """One unit counted on one origin until :meth:`InFlight.end`."""

    #: The chosen candidate's place in the list given to :meth:`InFlight.start`.
    position: int
    origin: str
    #: The lease's member in Redis; None when it was counted in this process only.
    member: str | None


class InFlight:
    """The fleet's counts in Redis while it answers, this process's otherwise. Thread-safe."""

    def __init__(
        self,
        client: BreakerRedis | None,
        *,
        namespace: str,
        ttl_s: float,
        retry_s: float,
        where: str = "Redis",
    ) -> None:
        self.namespace = namespace
        self._client = client
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._retry_s = retry_s
        self._where = where
        self._local: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._serial = itertools.count(1)
        self._next_try = 0.0  # monotonic; while in the future, Redis is not asked
        self._in_outage = False

    @classmethod
    def local(cls) -> InFlight:
        """Counts of this process only (no Redis configured)."""
        return cls(None, namespace="", ttl_s=1.0, retry_s=1.0)

    @property
    def shared(self) -> bool:
        """Whether the counts come from Redis now (False: this process's own)."""
        return self._client is not None and not self._in_outage

    def start(self, origins: Sequence[str]) -> Lease:
        """Count a unit on the origin of ``origins`` with the fewest in flight (ties: the first)."""
        if not origins:
            raise ValueError("no origin to choose from")
        member = self._new_member() if self._ask_redis() else None
        position = self._take_shared(origins, member) if member is not None else None
        with self._lock:
            if position is None:
                member = None
                position = min(range(len(origins)), key=lambda i: (self._local[origins[i]], i))
            self._local[origins[position]] += 1
        return Lease(position, origins[position], member)

    def end(self, lease: Lease) -> None:
        """The unit is over: its origin counts one less. Never raises (a lease expires anyway)."""
        with self._lock:
            self._local[lease.origin] -= 1
            if self._local[lease.origin] <= 0:
                del self._local[lease.origin]
        if lease.member is None or self._client is None or self._in_outage:
            return
        try:
            self._client.zrem(self._key(lease.origin), lease.member)
        except RedisUnavailable as exc:
            self._report_outage(exc)

    def counts(self, origins: Sequence[str]) -> dict[str, int]:
        """Units in flight on each origin: the fleet's while Redis answers (for admins, tests)."""
        if self._ask_redis():
            try:
                got = self._script(_COUNT, [self._key(o) for o in origins], [])
                return {o: int(n) for o, n in zip(origins, got, strict=True)}
            except RedisUnavailable as exc:
                self._report_outage(exc)
        with self._lock:
            return {o: self._local[o] for o in origins}

    # ---- Redis -------------------------------------------------------------------------------
    def _ask_redis(self) -> bool:
        """False without Redis, and while an outage's ``retry_s`` has not passed."""
        return self._client is not None and time.monotonic() >= self._next_try

    def _new_member(self) -> str:
        """Unique in the fleet, and says whose lease it is to anyone reading Redis."""
        return f"{socket.gethostname()}:{os.getpid()}:{next(self._serial)}"

    def _take_shared(self, origins: Sequence[str], member: str) -> int | None:
        """The chosen place (0-based) with its lease added in Redis; None when Redis is down."""
        try:
            best = self._script(_TAKE, [self._key(o) for o in origins], [member, self._ttl_ms])
        except RedisUnavailable as exc:
            self._report_outage(exc)
            return None
        with self._lock:
            back, self._in_outage = self._in_outage, False
        if back:
            log.warning(
                "in-flight counts: %s answers again; units go where the fleet has fewest",
                self._where,
            )
        return int(best) - 1

    def _script(self, body: str, keys: list[str], args: list[Any]) -> Any:
        """EVALSHA, sending the script itself when Redis does not know it (a restarted Redis).

        Not redis-py's ``Script``: it catches ``NoScriptError``, which :class:`BreakerRedis`
        turns into :class:`RedisUnavailable` (the cause is kept, and read here)."""
        assert self._client is not None
        try:
            return self._client.evalsha(_SHA[body], len(keys), *keys, *args)
        except RedisUnavailable as exc:
            if not isinstance(exc.__cause__, redis.exceptions.NoScriptError):
                raise
        return self._client.eval(body, len(keys), *keys, *args)

    def _report_outage(self, exc: Exception) -> None:
        """Warn once per outage; ask Redis again after ``retry_s``."""
        with self._lock:
            self._next_try = time.monotonic() + self._retry_s
            first, self._in_outage = not self._in_outage, True
        if not first:
            return
        log.warning(
            "in-flight counts: %s unreachable (%s); each process now chooses origins by its own "
            "counts, Redis tried again every %.0fs",
            self._where,
            exc,
            self._retry_s,
        )

    def _key(self, origin: str) -> str:
        return f"{self.namespace}:{origin}:in_flight"
