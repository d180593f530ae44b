"""A user's environment for the scripts and the README's commands, on the test's own services.

What a fresh shell on this machine has, less every doclane and Docling setting the test process
carries, plus the database, broker and breaker namespace of the test (so nothing the script
starts meets another test) and the servers scripts/test installed (so nothing is installed).
"""

from __future__ import annotations

import os

from tests.support.tools import DOCLING_MCP_BIN, DOCLING_RS_MCP_BIN

#: Variables of the machine a user's shell keeps: where the tools are, which Python, and the
#: database login scripts/lib.sh checks before it starts anything.
PASSED_THROUGH = ("DOCLANE_TOOLS_DIR", "DOCLANE_PYTHON", "DOCLANE_TEST_DATABASE_URL")


def user_environment(database_url: str, broker_url: str, **settings: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DOCLANE_", "DOCLING_")) or name in PASSED_THROUGH
    }
    env.update(
        DOCLANE_DATABASE_URL=database_url,
        DOCLANE_BROKER_URL=broker_url,
        # Every test's breakers live in a namespace of its own (tests/fixtures/isolation.py).
        DOCLANE_BREAKER_NAMESPACE=os.environ["DOCLANE_BREAKER_NAMESPACE"],
        DOCLANE_DOCLING_MCP_BIN=DOCLING_MCP_BIN,
        DOCLANE_DOCLING_RS_MCP_BIN=DOCLING_RS_MCP_BIN,
        **settings,
    )
    return env
