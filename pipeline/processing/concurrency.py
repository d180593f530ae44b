"""How many of a round's conversions a worker process keeps in flight: what its servers can
really do at once.

More calls at once than a server runs at once gain nothing: they queue there, or contend. One
docling-mcp in local mode builds a converter for every call and converts in Python under one
interpreter lock, so on a quiet machine a round of its documents two at a time was 0.87x the
same calls made directly one after the other, where one at a time was 1.00x (on a machine
loaded by other work two at once get a bigger share of it: docs/benchmarks.md, *Rounds fitted
to the server*); docling-rs-mcp converts in
parallel up to its ``--concurrency`` (2 by default). So unless ``DOCLANE_SERVER_CONCURRENCY``
says how many, a round's concurrency is the sum, over the process's servers, of what each runs
at once as its profile tells (:meth:`pipeline.profiles.base.Profile.concurrency`): its contract,
from its tools, and for a child doclane starts its command line; 1 for a server whose
contract does not tell. A pool's units go where the fewest are in flight, so a pool of two
docling-mcp gets one each.

Each server is asked once per process, at its first round: its tools, which its first
conversion would list anyway, through its breaker and without retry. One that does not answer
(down, its circuit open) counts for nothing, and is asked again at the next round; a round
always converts at least one at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from pipeline.mcp.client import McpClient
from pipeline.profiles.selection import available_profiles
from pipeline.profiles.settings import ProfileSettings

T = TypeVar("T")
log = logging.getLogger("doclane.processor")


class Servers(Protocol):
    """The part of the resilience layer that asks every server once."""

    def on_each_server(self, look: Callable[[McpClient], T]) -> Sequence[T | None]: ...


class ServerConcurrency:
    """``DOCLANE_SERVER_CONCURRENCY`` when set, else what the servers run at once."""

    def __init__(
        self, servers: Servers, profile_settings: ProfileSettings, setting: int | None
    ) -> None:
        self._servers = servers
        self._profile_settings = profile_settings
        self._setting = setting
        self._fitted: int | None = None

    def __call__(self) -> int:
        if self._setting is not None:
            return self._setting
        if self._fitted is not None:
            return self._fitted
        answers = self._servers.on_each_server(self._of_server)
        fitted = max(1, sum(n for n in answers if n is not None))
        if None not in answers:  # every server told: that is this process's figure
            self._fitted = fitted
            log.info("rounds convert %d document(s) at once: what the servers run at once", fitted)
        return fitted

    def _of_server(self, client: McpClient) -> int:
        """What one server runs at once, by the profile a job would use there first."""
        profiles = available_profiles([t.name for t in client.tools()], self._profile_settings)
        told = profiles[0].concurrency(client.endpoint) if profiles else None
        return told if told is not None else 1
