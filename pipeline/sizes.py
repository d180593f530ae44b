"""Size tiers: one place that says how big a document is, for queues and timeouts alike.

A 300-page PDF must neither starve small documents on a shared queue nor be cut off by a timeout
meant for a one-page memo, so the queue a job goes to (``doclane.small|medium|large``), the
worker's Celery time limits and the MCP client's call timeouts all pick their tier here. Keeping
the thresholds in this tiny module (stdlib only) lets every one of them import it without cycles.
"""

from __future__ import annotations

from typing import Final, Literal

SizeTier = Literal["small", "medium", "large"]

#: Every tier, smallest first.
SIZE_TIERS: Final[tuple[SizeTier, ...]] = ("small", "medium", "large")

MIB: Final = 1024 * 1024
#: Below this many bytes a document is ``small`` (10 MiB).
SMALL_BELOW_BYTES: Final = 10 * MIB
#: Below this many bytes (and not small) a document is ``medium`` (50 MiB); the rest is ``large``.
MEDIUM_BELOW_BYTES: Final = 50 * MIB


def size_tier(size_bytes: int | None) -> SizeTier:
    """The tier of a document of ``size_bytes``; an unknown size (a URL not yet fetched) is large.

    Unknown means "could be anything", and the large tier's longer limits only cost waiting
    time, whereas a too-short limit fails a job that would have succeeded.
    """
    if size_bytes is None:
        return "large"
    if size_bytes < 0:
        raise ValueError(f"a size cannot be negative: {size_bytes}")
    if size_bytes < SMALL_BELOW_BYTES:
        return "small"
    if size_bytes < MEDIUM_BELOW_BYTES:
        return "medium"
    return "large"
