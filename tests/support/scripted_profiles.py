"""A scripted MCP client for the profiles' unit tests: it answers each tool call as told."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.profiles.docling_mcp import CHECK_CACHE, CONVERT, EXPORT_MARKDOWN, SAVE

DOCLING_TOOLS = frozenset({CONVERT, EXPORT_MARKDOWN, SAVE, CHECK_CACHE, "list_cached_documents"})


@dataclass
class Result:
    raw: dict[str, Any]

    @property
    def is_error(self) -> bool:
        return bool(self.raw.get("isError"))


def ok(structured: dict[str, Any]) -> Result:
    return Result(
        {
            "content": [{"type": "text", "text": json.dumps(structured)}],
            "structuredContent": structured,
        }
    )


def failed(text: str) -> Result:
    return Result({"content": [{"type": "text", "text": text}], "isError": True})


@dataclass
class ScriptedClient:
    handlers: dict[str, Handler]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        size_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Result:
        self.calls.append((name, arguments))
        return self.handlers[name](arguments)

    def tools(self) -> Sequence[Tool]:
        return [Tool(name) for name in self.handlers]

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@dataclass
class Tool:
    name: str


Handler = Callable[[dict[str, Any]], Result]
