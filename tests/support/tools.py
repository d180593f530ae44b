"""Where scripts/lib.sh installs the heavy tools (``ensure_docling_mcp``, ``ensure_docling_serve``).

Each in a virtual environment of its own under ``DOCLANE_TOOLS_DIR`` (default
``~/.cache/doclane``): they pin their own torch and mcp, which doclane's .venv must not see.
"""

from __future__ import annotations

import os
from pathlib import Path

TOOLS = Path(os.environ.get("DOCLANE_TOOLS_DIR", Path.home() / ".cache" / "doclane"))
#: docling-mcp 3.3.0's server (``DOCLANE_DOCLING_MCP_BIN`` names another).
DOCLING_MCP_BIN = os.environ.get(
    "DOCLANE_DOCLING_MCP_BIN", str(TOOLS / "docling-mcp-venv" / "bin" / "docling-mcp-server")
)
#: docling-rs-mcp 2.52.7's server (``DOCLANE_DOCLING_RS_MCP_BIN`` names another).
DOCLING_RS_MCP_BIN = os.environ.get(
    "DOCLANE_DOCLING_RS_MCP_BIN", str(TOOLS / "docling-rs-mcp-venv" / "bin" / "docling-rs-mcp")
)
#: docling-serve's environment: only the topology bench uses it (large; installed on request).
DOCLING_SERVE_VENV = TOOLS / "docling-serve-venv"
DOCLING_SERVE_BINARY = DOCLING_SERVE_VENV / "bin" / "docling-serve"
