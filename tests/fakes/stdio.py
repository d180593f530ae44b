"""The fake server over stdio: ``python -m tests.fakes.server --transport stdio [--knobs JSON]``.

The same state, profile and SDK server as over HTTP, served by the SDK's ``stdio_server`` on this
process's stdin/stdout, so doclane's stdio transport meets a real MCP server process. There is no
control API over stdio: knobs are given at start (``--knobs '{"delay_s": 5}'``), and faults the
HTTP layer injects (``fail_next``) do not apply; what a child can do wrong (die, hang, print
junk, flood stderr) tests do to it directly, or with a scripted child.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from tests.fakes.knobs import Knobs
from tests.fakes.mcp_layer import FakeMcp
from tests.fakes.profiles import make_profile
from tests.fakes.state import FakeState

logger = logging.getLogger("fake_docling.stdio")


def serve_stdio(*, profile: str, cache_dir: Path, cache_max_documents: int, knobs: str) -> None:
    changes: dict[str, Any] = json.loads(knobs) if knobs else {}
    defaults = Knobs(cache_max_documents=cache_max_documents).updated(changes)
    state = FakeState(defaults=defaults, cache_dir=str(cache_dir), profile=profile)
    server_name = "docling" if profile == "docling" else "docling-per-format"
    fake = FakeMcp(state, make_profile(profile, state), server_name)
    logger.info("fake docling-mcp serving stdio, pid %s", os.getpid())

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await fake.server.run(
                read_stream, write_stream, fake.server.create_initialization_options()
            )

    anyio.run(run)
