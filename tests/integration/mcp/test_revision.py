"""The stateless 2026-07-28 revision against the fake server (the official SDK serves it).

``stateless=True`` makes the fake answer ``server/discover``; by default it is a server of the
2025 revisions (``server/discover`` is -32601), which is how the fallback is proven.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from errors import CallTimeout, MissingCapability
from pipeline.mcp.settings import McpSettings
from tests.fixtures.fake_server import FakeServer
from tests.support.mcp_clients import CONVERT, EXPORT, REPO_ROOT, MakeClient

MODERN = "2026-07-28"


def settings(version: str = "auto") -> McpSettings:
    return McpSettings(request_timeout_s=10, timeout_large_s=30, protocol_version=version)


def test_auto_uses_2026_07_28_where_offered_without_a_session(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(stateless=True)
    client = make_client(settings=settings())
    server = client.initialize()

    assert client.negotiated_version == MODERN and server.protocol_version == MODERN
    assert client.session_id is None and server.name == "docling"
    assert len(client.tools()) == 21
    converted = client.call_tool(CONVERT, {"source": docx})
    assert converted.structured is not None
    exported = client.call_tool(EXPORT, {"document_key": converted.structured["document_key"]})
    assert "quarterly-report" in str((exported.structured or {}).get("markdown"))

    stats = fake_server.stats()
    assert stats["initialize_calls"] == 0 and stats["session_ids_issued"] == []
    sent = stats["last_headers_by_method"]
    assert sent["tools/call"]["mcp-method"] == "tools/call"
    assert sent["tools/call"]["mcp-name"] == EXPORT
    assert sent["tools/call"]["mcp-protocol-version"] == MODERN
    assert "mcp-session-id" not in sent["tools/call"]
    assert sent["server/discover"]["mcp-method"] == "server/discover"
    client.close()
    assert fake_server.stats()["deletes"] == 0, "no session, nothing to delete"


def test_auto_falls_back_to_the_2025_handshake_on_an_older_server(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    client = make_client(settings=settings())
    server = client.initialize()

    assert server.protocol_version == "2025-11-25" and client.session_id
    stats = fake_server.stats()
    assert stats["requests_by_method"]["server/discover"] == 1
    assert stats["initialize_calls"] == 1


def test_a_pinned_2026_07_28_against_an_older_server_is_E305(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    client = make_client(settings=settings(MODERN))
    with pytest.raises(MissingCapability, match="does not offer protocol 2026-07-28"):
        client.initialize()
    assert fake_server.stats()["initialize_calls"] == 0


def test_a_pinned_2025_revision_is_honoured_by_a_server_that_offers_both(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    fake_server.configure(stateless=True)
    client = make_client(settings=settings("2025-11-25"))
    assert client.initialize().protocol_version == "2025-11-25"
    assert fake_server.stats()["requests_by_method"].get("server/discover", 0) == 0


def test_a_deadline_ends_a_stateless_call_by_closing_it_not_by_a_notification(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    """The 2026 HTTP wire has no client-to-server notifications: the ended request is the
    cancellation. The deadline still holds against keep-alives."""
    fake_server.configure(stateless=True)
    client = make_client(settings=settings())
    client.initialize()
    fake_server.configure(fail_next=1, fail_with="hang", keepalive_s=0.2)

    with pytest.raises(CallTimeout):
        client.call_tool(CONVERT, {"source": docx}, timeout=1.0)

    assert fake_server.stats()["cancelled"] == []
    fake_server.configure(keepalive_s=None)
    assert not client.call_tool(CONVERT, {"source": docx}).is_error


def test_the_server_forgetting_sessions_means_nothing_to_a_stateless_client(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(stateless=True)
    client = make_client(settings=settings())
    client.initialize()
    fake_server.restart()
    fake_server.configure(stateless=True)

    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    assert [t.to_state.value for t in client.trail] == ["initializing", "ready"]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_doclane_mcp_ping_and_tools_report_the_negotiated_revision(
    fake_server: FakeServer, version: str
) -> None:
    fake_server.configure(stateless=version == MODERN)
    for command in ("ping", "tools"):
        done = subprocess.run(
            [str(Path(sys.executable).with_name("doclane")), "mcp", command,
             "--origin", fake_server.url, "--json"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
            env={"PATH": "/usr/bin:/bin", "MCP_PROTOCOL_VERSION": "auto"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["server"]["protocol_version"] == version


def test_a_tool_error_is_a_result_in_the_stateless_revision_too(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(stateless=True)
    client = make_client(settings=settings())
    client.initialize()
    fake_server.configure(fail_next=1, fail_with="is_error", fail_tools=[CONVERT])

    result = client.call_tool(CONVERT, {"source": docx})

    assert result.is_error and CONVERT in result.text
