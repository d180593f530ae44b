"""Where a bench finds things: this checkout, its ``doclane`` command, the installed tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.tools import DOCLING_MCP_BIN, TOOLS

__all__ = ["DOCLANE", "DOCLING_MCP_BIN", "ROOT", "TOOLS", "commit_of"]

#: The repository's root: benches run from here (``python -m bench.<name>``).
ROOT = Path(__file__).resolve().parents[2]
#: The ``doclane`` command of this interpreter's environment.
DOCLANE = str(Path(sys.executable).with_name("doclane"))


def commit_of(checkout: Path) -> str | None:
    """The short commit a checkout has checked out (None when git cannot tell): what a bench
    that runs checkouts side by side labels each one's figures with."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None
