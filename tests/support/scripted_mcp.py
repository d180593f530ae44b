"""The client factory the MCP client's unit tests share, against a scripted server."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.mcp import McpClient

MakeClient = Callable[..., McpClient]
