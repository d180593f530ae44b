"""The tool registry: the server's tool list, cached with a TTL, refreshed on demand.

Every call looks its tool up here (a *hit* when the list is fresh, a *miss* when it had to be
fetched again first), so a call never goes out for a tool the server does not offer (E304) and
its arguments are checked against the schema the server published. The list goes stale after
``ttl`` seconds or when the server says ``notifications/tools/list_changed``; the next lookup
refreshes it, once, however many threads ask at the same time. A change announced while a
refresh is under way may not be in the list that refresh fetched, so the list stays stale and
the next lookup fetches it again (each invalidation bumps a generation number; a refresh marks
the list fresh only if no invalidation came after it started).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from errors import UnknownTool
from pipeline.mcp.protocol import Tool

ToolLoader = Callable[[], list[Tool]]


@dataclass(frozen=True, slots=True)
class RegistryStats:
    size: int
    hits: int
    misses: int
    refreshes: int
    invalidations: int
    age_s: float | None
    fresh: bool


class ToolRegistry:
    """Thread-safe cache of one server's tools."""

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._tools: dict[str, Tool] = {}
        self._loaded_at: float | None = None
        self._invalidated = False
        self._hits = 0
        self._misses = 0
        self._refreshes = 0
        self._invalidations = 0
        #: Bumped by every invalidation; a fetch started before a bump is stale on arrival.
        self._generation = 0
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()

    @property
    def generation(self) -> int:
        """Take this before fetching a list; hand it to :meth:`replace` with the list."""
        with self._lock:
            return self._generation

    def replace(self, tools: list[Tool], generation: int | None = None) -> None:
        """Install a list fetched when the registry was at ``generation`` (None: now).

        If an invalidation came in since, the list is kept (it is the best there is) but stays
        stale, so the next lookup fetches the changed list.
        """
        with self._lock:
            self._tools = {tool.name: tool for tool in tools}
            self._loaded_at = self._clock()
            self._invalidated = generation is not None and generation != self._generation
            self._refreshes += 1

    def invalidate(self) -> None:
        """Mark the list stale (``tools/list_changed``); the next lookup refetches it."""
        with self._lock:
            self._invalidated = True
            self._invalidations += 1
            self._generation += 1

    @property
    def fresh(self) -> bool:
        with self._lock:
            return self._fresh_locked()

    def _fresh_locked(self) -> bool:
        return (
            self._loaded_at is not None
            and not self._invalidated
            and self._clock() - self._loaded_at < self.ttl
        )

    def get(self, name: str, load: ToolLoader) -> Tool:
        """The tool called ``name``, refreshing a stale list first; E304 if there is none."""
        tools = self._current(load)
        tool = tools.get(name)
        if tool is None:
            raise UnknownTool(
                f"the server offers no tool {name!r}",
                detail={"tool": name, "available": sorted(tools)[:50]},
            )
        return tool

    def all(self, load: ToolLoader) -> list[Tool]:
        """Every tool, in the server's order, refreshing a stale list first."""
        return list(self._current(load).values())

    def _current(self, load: ToolLoader) -> dict[str, Tool]:
        with self._lock:
            if self._fresh_locked():
                self._hits += 1
                return self._tools
            self._misses += 1
        with self._refresh_lock:  # one refresh at a time; latecomers find it fresh
            with self._lock:
                if self._fresh_locked():
                    return self._tools
                generation = self._generation
            tools = load()
            self.replace(tools, generation)
        with self._lock:
            return self._tools

    def stats(self) -> RegistryStats:
        with self._lock:
            age = None if self._loaded_at is None else self._clock() - self._loaded_at
            return RegistryStats(
                size=len(self._tools),
                hits=self._hits,
                misses=self._misses,
                refreshes=self._refreshes,
                invalidations=self._invalidations,
                age_s=age,
                fresh=self._fresh_locked(),
            )
