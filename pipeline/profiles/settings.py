"""Settings for choosing and running a tool profile."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field

from pipeline.support.settings import Section

ProfileChoice = Literal["auto", "docling-rs", "docling-mcp", "per-format"]


class ProfileSettings(Section):
    """How doclane talks to the server's tools.

    ``profile`` forces one contract (``docling-rs``, ``docling-mcp``, ``per-format``); ``auto``
    picks the first that fits the server's tool list.
    ``server_cache_dir`` is where the *worker* can read the docling-mcp server's ``CACHE_DIR``
    (same host, or a shared volume); without it Docling JSON is not offered.
    """

    profile: ProfileChoice = Field(
        "auto", validation_alias=AliasChoices("DOCLANE_PROFILE", "profile")
    )
    server_cache_dir: Path | None = Field(
        None, validation_alias=AliasChoices("DOCLANE_SERVER_CACHE_DIR", "server_cache_dir")
    )
    #: docling-rs-mcp's Markdown tables: padded as docling pads them (false, so the Markdown
    #: equals docling's) or compact (true: smaller, the same cells).
    compact_tables: bool = Field(
        False, validation_alias=AliasChoices("DOCLANE_COMPACT_TABLES", "compact_tables")
    )
    #: The MCP client's reply bound, applied to the Docling JSON read back from that folder:
    #: a file the server saved is as much a reply as the bytes it sends.
    max_saved_bytes: int = Field(
        128 * 1024 * 1024,
        ge=1024,
        validation_alias=AliasChoices("DOCLANE_MCP_MAX_REPLY_BYTES", "max_saved_bytes"),
    )
