"""Against the fake server: handshake, headers, pagination, SSE and JSON replies, notifications."""

from __future__ import annotations

from typing import Any

import pytest

from errors import classify
from pipeline.mcp.client import McpClient
from pipeline.mcp.lifecycle import LifecycleState
from pipeline.mcp.protocol import LogMessage, Progress
from tests.fixtures.fake_server import FakeServer, FakeServerFactory
from tests.support.mcp_clients import CONVERT, EXPORT, MakeClient

ACCEPT = "application/json, text/event-stream"


def test_handshake_lists_the_real_servers_tools(client: McpClient, fake_server: FakeServer) -> None:
    assert client.state is LifecycleState.READY
    assert client.negotiated_version == "2025-11-25"
    assert client.server is not None and client.server.name == "docling"
    names = [tool.name for tool in client.tools()]
    assert len(names) == 21 and CONVERT in names and EXPORT in names
    stats = fake_server.stats()
    assert stats["initialize_calls"] == 1
    assert stats["requests_by_method"]["notifications/initialized"] == 1
    assert stats["requests_by_method"]["tools/list"] == 1
    assert client.session_id in stats["session_ids_issued"]


def test_every_request_carries_the_protocol_headers(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    client.call_tool(CONVERT, {"source": docx})
    client.ping()
    client.close()
    headers = fake_server.stats()["last_headers_by_method"]
    assert {"initialize", "notifications/initialized", "tools/list", "tools/call", "ping",
            "DELETE"} <= set(headers)  # fmt: skip
    for method, sent in headers.items():
        assert sent["accept"] == ACCEPT, method
        if method not in ("DELETE", "GET"):
            assert sent["content-type"] == "application/json", method
        if method == "initialize":
            assert "mcp-session-id" not in sent and "mcp-protocol-version" not in sent
        else:
            assert sent["mcp-session-id"] == client.session_id, method
            assert sent["mcp-protocol-version"] == "2025-11-25", method


def test_close_deletes_the_session(make_client: MakeClient, fake_server: FakeServer) -> None:
    client = make_client()
    client.initialize()
    session_id = client.session_id
    client.close()
    stats = fake_server.stats()
    assert stats["deletes"] == 1
    assert stats["last_headers_by_method"]["DELETE"]["mcp-session-id"] == session_id


def test_pagination_follows_next_cursor(make_client: MakeClient, fake_server: FakeServer) -> None:
    fake_server.configure(tools_page_size=4)
    client = make_client()
    client.initialize()
    assert len(client.tools()) == 21
    assert fake_server.stats()["requests_by_method"]["tools/list"] == 6


def test_convert_and_export_over_sse(client: McpClient, docx: str) -> None:
    converted = client.call_tool(CONVERT, {"source": docx}, size_bytes=40_000)
    assert not converted.is_error and converted.structured is not None
    key = converted.structured["document_key"]
    exported = client.call_tool(EXPORT, {"document_key": key})
    assert exported.structured is not None
    assert "quarterly-report" in exported.structured["markdown"]
    assert converted.duration > 0


def test_plain_json_replies(
    fake_server_factory: FakeServerFactory, settings: Any, docx: str
) -> None:
    server = fake_server_factory(json_response=True)
    with McpClient(server.url, settings=settings) as client:
        client.initialize()
        result = client.call_tool(CONVERT, {"source": docx})
        assert result.structured is not None and len(result.structured["document_key"]) == 32
        client.ping()
        assert server.stats()["requests_by_method"]["ping"] == 1  # answered in plain JSON too


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_older_protocol_answers_are_accepted(
    make_client: MakeClient, fake_server: FakeServer, version: str, docx: str
) -> None:
    fake_server.configure(protocol_version=version)
    client = make_client()
    client.initialize()
    assert client.negotiated_version == version
    client.call_tool(CONVERT, {"source": docx})
    sent = fake_server.stats()["last_headers_by_method"]["tools/call"]
    assert sent["mcp-protocol-version"] == version


def test_progress_and_logging_reach_the_callbacks(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    progress: list[Progress] = []
    logs: list[LogMessage] = []
    fake_server.configure(emit_progress=True, emit_logging=True)
    client = make_client(on_progress=progress.append, on_log=logs.append)
    client.initialize()
    client.call_tool(CONVERT, {"source": docx})
    assert [p.progress for p in progress] == [1.0, 2.0, 3.0]
    assert progress[-1].total == 3.0 and progress[-1].message == "step 3 of 3"
    assert len(logs) == 1 and logs[0].logger == "fake-docling"
    assert fake_server.stats()["progress_sent"] == 3


def test_list_changed_refreshes_the_registry(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(emit_list_changed=True)
    client.call_tool(CONVERT, {"source": docx})
    assert fake_server.stats()["list_changed_sent"] == 1
    assert not client.registry_stats().fresh
    fake_server.configure(emit_list_changed=False)
    client.call_tool(CONVERT, {"source": docx})
    assert fake_server.stats()["requests_by_method"]["tools/list"] == 2
    assert client.registry_stats().invalidations == 1


def test_server_ping_is_answered(client: McpClient, fake_server: FakeServer, docx: str) -> None:
    fake_server.configure(server_ping=True)
    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    answers = fake_server.stats()["server_request_answers"]
    assert answers == [{"method": "ping", "outcome": "result", "result": {}}]


def test_undeclared_server_requests_are_refused(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    fake_server.configure(server_request_method="sampling/createMessage")
    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    (answer,) = fake_server.stats()["server_request_answers"]
    assert answer["outcome"] == "error" and answer["error"]["code"] == -32601


def test_a_failing_tool_is_a_result(client: McpClient, tmp_path: Any) -> None:
    result = client.call_tool(CONVERT, {"source": str(tmp_path / "missing.docx")})
    assert result.is_error
    assert result.text == f"Error executing tool {CONVERT}"
    assert classify(result.raw).code == "E306"
