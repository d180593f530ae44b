"""How long a call may take: size tiers for tool calls, fixed limits for everything else.

A one-page memo and a 300-page report must not share a timeout: the memo's would cut the report
off, the report's would let a hung server hold a worker for minutes on a memo. So a tool call's
limit comes from the document's size (unknown size gets the top tier, because a too-short
limit fails a job that would have succeeded while a too-long one only costs waiting), and the
small protocol requests (initialize, tools/list, ping, answers) get ``request_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from errors import CallTimeout
from pipeline.queues import MEDIUM_BELOW_BYTES, SMALL_BELOW_BYTES, SizeTier

if TYPE_CHECKING:
    from pipeline.mcp.settings import McpSettings


@dataclass(frozen=True, slots=True)
class CallTimeouts:
    """Timeouts as a value, like ``httpx.Timeout``: build one, hand it to the client."""

    small_s: float = 60.0
    medium_s: float = 180.0
    large_s: float = 300.0
    small_below_bytes: int = SMALL_BELOW_BYTES
    medium_below_bytes: int = MEDIUM_BELOW_BYTES
    #: initialize, tools/list, ping, answers to the server, notifications.
    request_s: float = 30.0
    #: TCP connect; a server that does not accept within this is unavailable (E302), not slow.
    connect_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("small_s", "medium_s", "large_s", "request_s", "connect_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.small_below_bytes <= self.medium_below_bytes:
            raise ValueError("need 0 <= small_below_bytes <= medium_below_bytes")

    def tier(self, size_bytes: int | None) -> SizeTier:
        if size_bytes is None:
            return "large"
        if size_bytes < 0:
            raise ValueError(f"a size cannot be negative: {size_bytes}")
        if size_bytes < self.small_below_bytes:
            return "small"
        if size_bytes < self.medium_below_bytes:
            return "medium"
        return "large"

    def for_size(self, size_bytes: int | None) -> float:
        """The tool-call timeout for a document of ``size_bytes`` (None: unknown, top tier)."""
        return {"small": self.small_s, "medium": self.medium_s, "large": self.large_s}[
            self.tier(size_bytes)
        ]

    @classmethod
    def from_settings(cls, settings: McpSettings) -> CallTimeouts:
        return cls(
            small_s=settings.timeout_small_s,
            medium_s=settings.timeout_medium_s,
            large_s=settings.timeout_large_s,
            small_below_bytes=settings.timeout_small_below_bytes,
            medium_below_bytes=settings.timeout_medium_below_bytes,
            request_s=settings.request_timeout_s,
            connect_s=settings.connect_timeout_s,
        )


class Deadline:
    """A point in monotonic time a call must finish by."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def check(self, what: str) -> None:
        """Raise E303 when the deadline has passed."""
        if self.expired():
            raise CallTimeout(f"{what}: no answer within {self.seconds:g}s")

    def sleep(self, seconds: float, what: str) -> None:
        """Wait ``seconds`` (a server-given retry delay), or raise E303 if that would overrun."""
        if seconds > self.remaining():
            raise CallTimeout(
                f"{what}: the server asked to wait {seconds:g}s before resuming, "
                f"but only {self.remaining():.3g}s of {self.seconds:g}s remain"
            )
        if seconds > 0:
            time.sleep(seconds)
