"""A resource that is its own context manager, closed when its ``with`` block ends.

The MCP client, the downloader, the job store and the resilience layer each hold connections
that must be given back however a block ends: ``with`` hands the resource itself back and
calls its ``close`` on the way out, an exception or not (and lets the exception go on).
"""

from __future__ import annotations

from typing import Self


class Closing:
    """Subclasses define :meth:`close`; ``with resource:`` then closes it at the block's end."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
