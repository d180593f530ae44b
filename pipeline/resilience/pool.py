"""A pool of Docling MCP servers: one client and one breaker per origin, work spread over them.

A unit of work (convert, then export) runs on one origin from start to end: docling-mcp keeps
converted documents in a per-process cache, so an export must reach the server that converted.
A unit goes to the origin with the fewest units in flight across the fleet (counted in Redis
by :mod:`.in_flight`; this process's own counts while Redis is down), ties broken by this
process's round-robin, among origins whose circuit is not open; a unit whose try failed
because its server was sick prefers another origin on its next try (the whole unit moves, so
the cache rule still holds, and a server that just failed is the likeliest to fail again; with
one origin the unit simply stays). An origin whose breaker refuses at admission (half-open with
its one trial running elsewhere, or opened a moment ago by another process) costs the unit
nothing: the same try moves on to the next origin, and only when none is left does E309 leave.
Clients are created and initialized lazily, inside the breaker's call, so an open circuit costs
no request at all, not even a handshake.

Redis round trips per unit: one with a single origin (the breaker's read of its circuit); with
several, three whatever their number: every circuit read at once (which also serves the chosen
breaker's admission), the in-flight choice, and the unit's end.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from errors import CircuitOpen
from pipeline.mcp.client import McpClient
from pipeline.mcp.endpoints import origin_of

from .breaker import OriginBreaker
from .in_flight import InFlight
from .storage import peek_all

T = TypeVar("T")


@dataclass(frozen=True)
class Choice:
    """The endpoint chosen for one unit, and its circuit as read to choose it."""

    endpoint: str
    #: State and failure count read for the choice; None when there was nothing to choose and
    #: the breaker's admission reads it.
    circuit: tuple[str, int] | None = None


class ServerPool:
    """Thread-safe; one per process."""

    def __init__(
        self,
        endpoints: Sequence[str],
        client_factory: Callable[[str], McpClient],
        breaker_factory: Callable[[str], OriginBreaker],
        *,
        first: int = 0,
        in_flight: InFlight | None = None,
    ) -> None:
        """``first``: where this process's round starts (its index among the worker's pool
        processes). The round breaks ties between origins with as many units in flight, and
        alone decides while the counts are this process's own (Redis down): started at the
        same origin, processes that take jobs of the same length move in step and crowd one
        server after the other (4 processes on 2 servers of 2 slots each got half of linear);
        started one apart, they stay one apart.

        ``in_flight``: where units are counted (None: in this process only). With one
        endpoint there is nothing to choose, and nothing is counted."""
        if not endpoints:
            raise ValueError("a server pool needs at least one endpoint")
        self.endpoints = list(dict.fromkeys(endpoints))
        self._client_factory = client_factory
        self._breakers = {e: breaker_factory(origin_of(e)) for e in self.endpoints}
        self._clients: dict[str, McpClient] = {}
        self._lock = threading.Lock()
        self._turn = itertools.count(first % len(self.endpoints))
        self._in_flight = in_flight or InFlight.local()

    def breaker(self, endpoint: str) -> OriginBreaker:
        return self._breakers[endpoint]

    def breakers(self) -> list[OriginBreaker]:
        return list(self._breakers.values())

    @contextmanager
    def chosen(
        self, avoid: Collection[str] = (), refused: Mapping[str, float] = {}
    ) -> Iterator[Choice]:
        """The endpoint for one unit, counted in flight there until the block ends.

        Among endpoints whose circuit admits calls, preferring those not in ``avoid``: the one
        with the fewest units in flight. ``refused`` maps endpoints whose breaker just answered
        E309 (e.g. half-open with its one trial running elsewhere) to their ``retry_after``;
        they are not chosen again. No endpoint left: E309 with the soonest reset, so the caller
        can come back then.
        """
        if len(self.endpoints) == 1:
            yield self._alone(refused)
            return
        candidates, circuits = self._candidates(avoid, refused)
        lease = self._in_flight.start([origin_of(e) for e in candidates])
        try:
            endpoint = candidates[lease.position]
            yield Choice(endpoint, circuits[endpoint])
        finally:
            self._in_flight.end(lease)

    def call(self, choice: Choice, func: Callable[[], T]) -> T:
        """``func`` through the chosen endpoint's breaker (E309 if its circuit refuses)."""
        return self._breakers[choice.endpoint].call(func, circuit=choice.circuit)

    def _alone(self, refused: Mapping[str, float]) -> Choice:
        """The one endpoint, without reading its circuit: its breaker's admission reads it
        anyway (one Redis read per unit, not two), and an open circuit's E309 comes back here
        through ``refused`` and leaves as the same E309 with the same wait."""
        if refused:
            self._candidates((), refused)  # raises E309
        return Choice(self.endpoints[0])

    def _candidates(
        self, avoid: Collection[str], refused: Mapping[str, float]
    ) -> tuple[list[str], dict[str, tuple[str, int]]]:
        """Usable endpoints (preferred ones only, when any), in this process's round order,
        and every endpoint's circuit (state, failures), read at once."""
        start = next(self._turn)
        ordered = [
            self.endpoints[(start + i) % len(self.endpoints)] for i in range(len(self.endpoints))
        ]
        read = peek_all([self._breakers[e].storage for e in ordered])
        circuits = dict(zip(ordered, read, strict=True))
        usable = [
            e for e in ordered if e not in refused and not self._breakers[e].is_open(circuits[e][0])
        ]
        if not usable:
            wait = min(
                refused[e] if e in refused else self._breakers[e].retry_after()
                for e in self.endpoints
            )
            origins = [origin_of(e) for e in self.endpoints]
            raise CircuitOpen(
                f"the circuit of every server is open ({', '.join(origins)})",
                retry_after=wait,
                detail={"origins": origins},
            )
        preferred = [e for e in usable if e not in avoid]
        return preferred or usable, circuits

    def in_flight(self) -> dict[str, int]:
        """Units in flight on each endpoint's origin (the fleet's while Redis answers)."""
        counts = self._in_flight.counts([origin_of(e) for e in self.endpoints])
        return {e: counts[origin_of(e)] for e in self.endpoints}

    def ready_client(self, endpoint: str) -> McpClient:
        """The endpoint's client, initialized (idempotent; a failed handshake is tried again)."""
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = self._client_factory(endpoint)
                self._clients[endpoint] = client
        client.initialize()
        return client

    def clients(self) -> dict[str, McpClient]:
        with self._lock:
            return dict(self._clients)

    def close(self) -> None:
        """End every session (DELETE); safe to call twice."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
