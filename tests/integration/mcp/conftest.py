"""Fixtures of the MCP client's integration tests: clients of the fake Docling MCP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings, environment_variables
from tests.fixtures.fake_server import FakeServer
from tests.support.mcp_clients import REPO_ROOT, MakeClient


@pytest.fixture(autouse=True)
def clean_mcp_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MCP variable from the developer's shell leaks into a test (nor a ``.env``: no test
    runs where one is, tests/fixtures/isolation.py)."""
    for name in environment_variables():
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def settings() -> McpSettings:
    """Short limits, so a test that goes wrong fails in seconds, not minutes; the 2025 session
    path (the stateless revision has its own tests: test_revision.py)."""
    return McpSettings(
        request_timeout_s=10, timeout_large_s=30, sse_retry_ms=100, protocol_version="2025-11-25"
    )


@pytest.fixture
def make_client(fake_server: FakeServer, settings: McpSettings) -> Iterator[MakeClient]:
    """``make_client(endpoint=None, **options)``: a client of the fake (closed afterwards)."""
    made: list[McpClient] = []

    def make(endpoint: str | None = None, **options: Any) -> McpClient:
        options.setdefault("settings", settings)
        client = McpClient(endpoint or fake_server.url, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client(make_client: MakeClient) -> McpClient:
    """An initialized client of the (reset) fake server."""
    made = make_client()
    made.initialize()
    return made


@pytest.fixture
def docx() -> str:
    return str(REPO_ROOT / "examples" / "quarterly-report.docx")


@pytest.fixture
def markdown_files(tmp_path: Path) -> list[str]:
    """Sixteen small documents whose converted text says which one they are."""
    paths = []
    for n in range(16):
        path = tmp_path / f"doc-{n}.md"
        path.write_text(f"# Document number {n}\n\nBody of document {n}.\n")
        paths.append(str(path))
    return paths
