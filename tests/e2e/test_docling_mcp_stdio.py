"""The real docling-mcp 3.3.0 as a stdio child: the six samples, a killed child, no orphans."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from errors import ServerUnavailable
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.stdio import StdioTransport
from tests.fixtures.examples import EXPECTED_MARKDOWN, example
from tests.fixtures.processes import process_gone
from tests.fixtures.stdio_children import (
    docling_stdio_command,
    docling_stdio_environment,
    marked_children,
)
from tests.fixtures.waiting import wait_for

pytestmark = pytest.mark.docling

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docling-stdio-cache")


@pytest.fixture(scope="module")
def client(cache_dir: Path) -> Iterator[McpClient]:
    """One docling-mcp child for the module (it takes seconds to start)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in docling_stdio_environment(cache_dir).items():
            patch.setenv(name, value)
        patch.delenv("DOCLING_MCP_ORIGIN", raising=False)
        settings = McpSettings(command=docling_stdio_command(), request_timeout_s=120)
        with McpClient(settings=settings) as made:
            made.initialize()
            yield made
    wait_for(lambda: not marked_children(cache_dir), message="the child stopped with the client")


def test_the_handshake_over_stdio(client: McpClient) -> None:
    """docling-mcp 3.3.0 serves the stateless revision over stdio too (auto finds it)."""
    assert client.server is not None and client.server.name == "docling"
    assert client.negotiated_version == "2026-07-28" and client.session_id is None
    assert len(client.tools()) == 21


@pytest.mark.parametrize("name", sorted(EXPECTED_MARKDOWN))
def test_convert_then_export_over_stdio(client: McpClient, name: str) -> None:
    path = example(name)
    converted = client.call_tool(CONVERT, {"source": str(path)}, size_bytes=path.stat().st_size)
    assert not converted.is_error, converted.text
    assert converted.structured is not None
    exported = client.call_tool(EXPORT, {"document_key": converted.structured["document_key"]})
    assert exported.structured is not None
    for text in EXPECTED_MARKDOWN[name]:
        assert text in exported.structured["markdown"], (name, text)


def test_a_child_killed_mid_conversion_is_replaced_on_the_next_call(
    client: McpClient, cache_dir: Path, tmp_path: Path
) -> None:
    transport = client._transport
    assert isinstance(transport, StdioTransport)
    connection = transport._connection
    assert connection is not None
    first = connection.child.pid
    assert marked_children(cache_dir) == [first]
    source = tmp_path / f"unique-{uuid.uuid4().hex}.html"  # never converted: no cache hit
    source.write_text("<html><body><h1>Killed mid-conversion</h1><p>text</p></body></html>")

    def kill_once_converting() -> None:
        wait_for(
            lambda: any(source.name in line for line in connection.child.tail),
            timeout=60,
            interval=0.005,
            message="the child logging that it converts the file",
        )
        os.kill(first, signal.SIGKILL)

    killer = threading.Thread(target=kill_once_converting, daemon=True)
    killer.start()
    with pytest.raises(ServerUnavailable, match="SIGKILL"):
        client.call_tool(CONVERT, {"source": str(source)})
    killer.join(30)
    wait_for(lambda: process_gone(first), message="the killed child gone")

    converted = client.call_tool(CONVERT, {"source": str(source)})  # fresh child, re-initialized
    assert not converted.is_error, converted.text
    second = transport.child_pid
    assert second is not None and second != first
    assert marked_children(cache_dir) == [second]
