"""Where a bench finds things: this checkout, its ``doclane`` command, the installed tools."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.tools import DOCLING_MCP_BIN, TOOLS

__all__ = ["DOCLANE", "DOCLING_MCP_BIN", "ROOT", "TOOLS"]

#: The repository's root: benches run from here (``python -m bench.<name>``).
ROOT = Path(__file__).resolve().parents[2]
#: The ``doclane`` command of this interpreter's environment.
DOCLANE = str(Path(sys.executable).with_name("doclane"))
