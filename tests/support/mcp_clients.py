"""Tool names, the repository root and the client factory the MCP integration tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.mcp.client import McpClient

REPO_ROOT = Path(__file__).resolve().parents[2]
CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"
MakeClient = Callable[..., McpClient]
