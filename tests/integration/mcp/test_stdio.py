"""The client over stdio, against the fake Docling MCP server run as a real child process.

``python -m tests.fakes.server --transport stdio`` is the official SDK's stdio server around the
fake's tools, so everything here is the real wire: handshake, registry, calls, notifications,
deadlines, a child killed mid-call, and the CLI's ``--command``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from errors import CallTimeout, ServerUnavailable
from pipeline.cli import app
from pipeline.mcp.client import McpClient
from pipeline.mcp.lifecycle import LifecycleState
from pipeline.mcp.protocol import LogMessage, Progress
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.stdio import StdioTransport
from pipeline.resilience.facade import build_resilient
from pipeline.settings.tree import read_settings
from tests.fixtures.processes import process_gone
from tests.fixtures.waiting import wait_for
from tests.support.mcp_clients import CONVERT, EXPORT, REPO_ROOT


def fake_command(**knobs: Any) -> str:
    command = [sys.executable, "-m", "tests.fakes.server", "--transport", "stdio"]
    if knobs:
        command += ["--knobs", json.dumps(knobs)]
    return shlex.join(command)


@pytest.fixture(autouse=True)
def from_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake is ``python -m tests.fakes.server``: the child finds it through PYTHONPATH,
    while the test stays in its own folder (no developer's ``.env`` there)."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    )


@pytest.fixture
def make_stdio_client() -> Iterator[Any]:
    made: list[McpClient] = []

    def make(
        protocol_version: str = "2025-11-25",
        on_log: Callable[[LogMessage], None] | None = None,
        **knobs: Any,
    ) -> McpClient:
        """The session path by default; ``protocol_version="auto"`` finds 2026-07-28 (the SDK
        serves it over stdio by itself)."""
        settings = McpSettings(
            command=fake_command(**knobs),
            request_timeout_s=20,
            timeout_large_s=30,
            protocol_version=protocol_version,
        )
        client = McpClient(settings=settings, on_progress=progress.append, on_log=on_log)
        made.append(client)
        return client

    progress: list[Progress] = []
    make.progress = progress  # type: ignore[attr-defined]
    yield make
    for client in made:
        client.close()


def child_pid(client: McpClient) -> int:
    transport = client._transport
    assert isinstance(transport, StdioTransport)
    pid = transport.child_pid
    assert pid is not None
    return pid


def test_handshake_registry_and_a_conversion_over_stdio(make_stdio_client: Any) -> None:
    client = make_stdio_client()
    server = client.initialize()
    assert server.name == "docling"
    assert client.endpoint.startswith("stdio:")
    assert client.origin.startswith("stdio://") and f"/{os.getpid()}/" in client.origin
    assert len(client.tools()) == 21
    docx = str(REPO_ROOT / "examples" / "quarterly-report.docx")
    key = client.call_tool(CONVERT, {"source": docx}).structured["document_key"]
    markdown = client.call_tool(EXPORT, {"document_key": key}).structured["markdown"]
    assert markdown.strip()
    pid = child_pid(client)
    client.close()
    assert process_gone(pid)


def test_notifications_reach_the_listeners(make_stdio_client: Any) -> None:
    client = make_stdio_client(emit_progress=True, emit_logging=True, server_ping=True)
    client.initialize()
    docx = str(REPO_ROOT / "examples" / "quarterly-report.docx")
    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    assert [p.progress for p in make_stdio_client.progress] == [1, 2, 3]


def test_a_deadline_holds_and_the_child_serves_on(make_stdio_client: Any) -> None:
    client = make_stdio_client(delay_s=30, delay_tools=[CONVERT])
    client.initialize()
    docx = str(REPO_ROOT / "examples" / "quarterly-report.docx")
    pid = child_pid(client)
    with pytest.raises(CallTimeout):
        client.call_tool(CONVERT, {"source": docx}, timeout=0.5)
    client.ping()  # answered (it raises otherwise), by the same child:
    assert child_pid(client) == pid


def test_a_child_killed_mid_call_is_E302_then_a_fresh_child_serves(
    make_stdio_client: Any,
) -> None:
    def kill_once_the_child_holds_the_call(message: LogMessage) -> None:
        if isinstance(message.data, dict) and message.data.get("event") == "call started":
            os.kill(first, signal.SIGKILL)

    client = make_stdio_client(
        delay_s=60,
        delay_tools=[CONVERT],
        announce_call_start=True,
        on_log=kill_once_the_child_holds_the_call,
    )
    client.initialize()
    first = child_pid(client)
    docx = str(REPO_ROOT / "examples" / "quarterly-report.docx")
    with pytest.raises(ServerUnavailable, match="SIGKILL"):
        client.call_tool(CONVERT, {"source": docx})
    wait_for(lambda: process_gone(first), message="the killed child reaped")
    # The next call re-initializes transparently, on a fresh child.
    client.ping()
    assert child_pid(client) != first
    assert client.state is LifecycleState.READY
    reinit = [step for step in client.trail if step.to_state is LifecycleState.REINITIALIZING]
    assert reinit and "child" in reinit[0].reason and "HTTP" not in reinit[0].reason


def test_a_stateless_client_gets_a_fresh_child_without_any_handshake(
    make_stdio_client: Any,
) -> None:
    client = make_stdio_client(protocol_version="auto")
    client.initialize()
    assert client.negotiated_version == "2026-07-28" and client.session_id is None
    first = child_pid(client)
    transport = client._transport
    assert isinstance(transport, StdioTransport)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: process_gone(first), message="the killed child reaped")
    # The transport learns of the death from the child's stdout closing (its reader thread).
    wait_for(
        lambda: transport._connection is not None and transport._connection.dead,
        message="the transport to notice the dead child",
    )

    client.ping()
    assert child_pid(client) != first
    assert [step.to_state for step in client.trail] == [
        LifecycleState.INITIALIZING,
        LifecycleState.READY,
    ], "no session: nothing to re-initialize"


def test_the_breaker_of_a_child_is_this_process_s_own() -> None:
    settings = McpSettings(command=fake_command())
    resilient = build_resilient(settings, read_settings(resilience=dict(redis_url="")).resilience)
    try:
        (breaker,) = resilient.breakers()
        assert breaker["origin"].startswith("stdio://")
        assert f"/{os.getpid()}/" in breaker["origin"]

        def ping_from(client: McpClient) -> str:
            client.ping()
            return client.origin

        assert resilient.run(ping_from) == breaker["origin"]  # the unit ran under this breaker
    finally:
        resilient.close()


runner = CliRunner()


def test_cli_ping_and_tools_with_command() -> None:
    result = runner.invoke(app, ["mcp", "ping", "--command", fake_command(), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["endpoint"].startswith("stdio:")
    result = runner.invoke(app, ["mcp", "tools", "--command", fake_command(), "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["tools"]) == 21


def test_cli_refuses_origin_and_command_together() -> None:
    result = runner.invoke(
        app, ["mcp", "ping", "--command", fake_command(), "--origin", "http://h:1", "--json"]
    )
    assert result.exit_code == 2
    assert "not both" in result.output


def test_settings_pick_stdio_from_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_COMMAND", "docling-mcp-server  --transport 'stdio'")
    settings = McpSettings.from_environment()
    assert settings.endpoints == ["stdio:docling-mcp-server --transport stdio"]
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", "http://127.0.0.1:8765")
    with pytest.raises(ValueError, match="not both"):
        McpSettings.from_environment()
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", "")  # compose's stdio stanza empties it
    assert McpSettings.from_environment().endpoints == [
        "stdio:docling-mcp-server --transport stdio"
    ]
    monkeypatch.setenv("DOCLING_MCP_COMMAND", "")
    with pytest.raises(ValueError, match="no DOCLING_MCP_COMMAND"):
        McpSettings.from_environment()
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", "http://127.0.0.1:8765")
    assert McpSettings.from_environment().endpoints == ["http://127.0.0.1:8765/mcp"]


def test_a_missing_command_is_E302(tmp_path: Path) -> None:
    client = McpClient(settings=McpSettings(command="no-such-docling-mcp-server --x"))
    with pytest.raises(ServerUnavailable, match="command not found"):
        client.initialize()
    client.close()
