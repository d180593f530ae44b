"""Replies past a few MiB, parsed as they arrive, against the fake server (the official SDK).

Over stdio and as JSON bodies (the 2026-07-28 revision) a reply longer than ``STREAM_AFTER`` is
parsed as it is read, and the export's text block that repeats its ``structuredContent`` is not
kept. What a caller and a profile get must be what a short reply gives: the same structured
result, the same markdown, the same errors (E312 past the bound, E200 for a malformed body).
Memory is measured by bench/worker_memory.py, not here.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from errors import ParseError, ReplyTooLarge
from pipeline.mcp._large_reply import FEED_BYTES, STREAM_AFTER
from pipeline.mcp.client import McpClient
from pipeline.mcp.protocol import ToolResult
from pipeline.mcp.settings import McpSettings
from pipeline.profiles.base import ConversionRequest, ToolCalls
from pipeline.profiles.docling_mcp import DoclingMcpProfile
from tests.fixtures.fake_server import FakeServer
from tests.support.mcp_clients import CONVERT, EXPORT, REPO_ROOT

WIRES = ["sse", "json", "stdio"]
#: The wires whose long replies are parsed as they arrive.
STREAMED = ("json", "stdio")
#: Markdown whose export reply (the markdown twice, escaped) is well past STREAM_AFTER.
LARGE = STREAM_AFTER + 2 * FEED_BYTES
LINE = 'A line of *markdown* with "quotes", a tab\t, accents é ü and 中文.\n'


@pytest.fixture(autouse=True)
def from_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stdio fake is ``python -m tests.fakes.server``: its child finds it on PYTHONPATH."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    )


@pytest.fixture
def open_client(fake_server: FakeServer) -> Iterator[Any]:
    made: list[McpClient] = []

    def open_(wire: str, **options: Any) -> McpClient:
        options.setdefault("request_timeout_s", 60)
        if wire == "stdio":
            command = shlex.join(
                [sys.executable, "-m", "tests.fakes.server", "--transport", "stdio"]
            )
            settings = McpSettings(command=command, protocol_version="2025-11-25", **options)
            client = McpClient(settings=settings)
        else:
            fake_server.configure(stateless=wire == "json")
            version = "2026-07-28" if wire == "json" else "2025-11-25"
            client = McpClient(
                fake_server.url, settings=McpSettings(protocol_version=version, **options)
            )
        made.append(client)
        client.initialize()
        return client

    yield open_
    for client in made:
        client.close()


def markdown_file(folder: Path, size: int) -> tuple[Path, str]:
    text = (LINE * (size // len(LINE) + 1))[:size]
    path = folder / f"doc-{size}.md"
    path.write_text(text, encoding="utf-8")
    return path, text


def export(client: McpClient, path: Path) -> ToolResult:
    key = client.call_tool(CONVERT, {"source": str(path)}).structured["document_key"]  # type: ignore[index]
    return client.call_tool(EXPORT, {"document_key": key})


def without_repeats(result: ToolResult) -> list[dict[str, Any]]:
    """The content blocks that say more than ``structuredContent`` does."""
    return [
        block
        for block in result.content
        if block.get("type") != "text" or json.loads(block["text"]) != result.structured
    ]


@pytest.mark.parametrize("wire", WIRES)
def test_a_large_export_gives_what_a_short_one_gives(
    open_client: Any, tmp_path: Path, wire: str
) -> None:
    client = open_client(wire)
    small_path, small_text = markdown_file(tmp_path, 5000)
    large_path, large_text = markdown_file(tmp_path, LARGE)
    small, large = export(client, small_path), export(client, large_path)

    assert small.structured is not None and large.structured is not None
    assert small.structured["markdown"] == small_text
    assert large.structured["markdown"] == large_text
    assert set(large.structured) == set(small.structured)
    assert not small.is_error and not large.is_error
    # The short reply's text block repeats its structuredContent; a long reply parsed as it
    # arrives keeps one copy: the same blocks less that one.
    assert len(small.content) == 1 and without_repeats(small) == []
    assert without_repeats(large) == []
    if wire in STREAMED:
        assert large.content == []
    # What the profile makes of it: the markdown, as from a short reply.
    request = ConversionRequest(
        source=str(large_path), kind="file", suffix=".md", formats=("md",), size_bytes=LARGE
    )
    conversion = DoclingMcpProfile().convert(ToolCalls(client), request)
    assert conversion.outputs == {"md": large_text}


@pytest.mark.parametrize("shape", ["sse", "json"])
def test_the_bound_holds_once_a_reply_is_parsed_as_it_arrives(
    open_client: Any, fake_server: FakeServer, tmp_path: Path, shape: str
) -> None:
    limit = STREAM_AFTER + FEED_BYTES
    client = open_client("sse", max_reply_bytes=limit)
    fake_server.configure(oversize_reply_bytes=limit + 3 * FEED_BYTES, oversize_as=shape)
    with pytest.raises(ReplyTooLarge) as caught:
        client.call_tool("get_page_thumbnail", {"document_key": "k"})
    assert caught.value.code == "E312" and str(limit) in caught.value.message
    fake_server.configure(oversize_reply_bytes=limit - FEED_BYTES, oversize_as=shape)
    result = client.call_tool("get_page_thumbnail", {"document_key": "k"})
    assert len(result.text) == limit - FEED_BYTES


def test_a_malformed_body_is_E200_long_or_short(open_client: Any, fake_server: FakeServer) -> None:
    client = open_client("sse")
    fake_server.configure(fail_next=1, fail_with="garbage")
    with pytest.raises(ParseError) as short:
        client.call_tool("get_page_thumbnail", {"document_key": "k"})
    fake_server.configure(
        oversize_reply_bytes=STREAM_AFTER + 2 * FEED_BYTES, oversize_as="json_cut"
    )
    with pytest.raises(ParseError) as long:
        client.call_tool("get_page_thumbnail", {"document_key": "k"})
    assert short.value.code == long.value.code == "E200"
    assert "unparseable JSON" in short.value.message and "unparseable JSON" in long.value.message
