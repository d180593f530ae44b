"""Fixtures of the MCP client's unit tests: a scripted server and clients wired to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings, environment_variables
from tests.support.scripted_mcp import MakeClient, ScriptedServer

MCP_ENVIRONMENT = environment_variables()


@pytest.fixture(autouse=True)
def clean_mcp_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MCP variable from the developer's shell leaks into a test (nor a ``.env``: no test
    runs where one is, tests/fixtures/isolation.py)."""
    for name in MCP_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> ScriptedServer:
    return ScriptedServer()


@pytest.fixture
def make_client(server: ScriptedServer) -> Iterator[MakeClient]:
    """``make_client(**client_options)`` -> a client on the scripted server (closed afterwards)."""
    made: list[McpClient] = []

    def make(
        transport: Any = None, settings: McpSettings | None = None, **options: Any
    ) -> McpClient:
        client = McpClient(
            transport=transport or server,
            # The 2025 session path; the 2026-07-28 one has its own tests (test_revision.py).
            settings=settings or McpSettings(protocol_version="2025-11-25"),
            **options,
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client(make_client: MakeClient) -> McpClient:
    """An initialized client on the scripted server."""
    made = make_client()
    made.initialize()
    return made
