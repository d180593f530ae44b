"""Each fault knob of the fake server, seen on the wire (raw httpx) or by the SDK client."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from tests.fixtures.fake_server import FakeServer
from tests.support.raw_mcp import RawSession

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


@pytest.mark.parametrize("status", [500, 502, 503, 429, 401, 403, 404])
def test_http_faults_answer_with_the_status_then_heal(
    fake_server: FakeServer, session: RawSession, sample: str, status: int
) -> None:
    fake_server.configure(fail_next=1, fail_with=f"http{status}", retry_after_s=7)
    reply = session.call_tool(CONVERT, {"source": sample})
    assert reply.status == status
    body = json.loads(reply.text)
    assert body["error"]["message"] == f"injected HTTP {status}" and body["id"] is not None
    if status == 429:
        assert reply.headers["retry-after"] == "7"
    if status == 401:
        assert reply.headers["www-authenticate"].startswith("Bearer")
    assert session.call_tool(CONVERT, {"source": sample}).result["isError"] is False
    stats = fake_server.stats()
    assert [f["fault"] for f in stats["faults_injected"]] == [f"http{status}"]
    assert stats["requests_by_tool"][CONVERT] == 2
    assert fake_server.knobs()["fail_next"] == 0


def test_fail_next_counts_down_and_minus_one_means_always(
    fake_server: FakeServer, session: RawSession, sample: str
) -> None:
    fake_server.configure(fail_next=2, fail_with="http503")
    statuses = [session.call_tool(CONVERT, {"source": sample}).status for _ in range(3)]
    assert statuses == [503, 503, 200]
    fake_server.configure(fail_next=-1)
    assert [session.call_tool(CONVERT, {"source": sample}).status for _ in range(3)] == [503] * 3
    assert fake_server.knobs()["fail_next"] == -1


def test_fail_methods_can_target_the_handshake(fake_server: FakeServer) -> None:
    fake_server.configure(fail_next=1, fail_with="http503", fail_methods=["initialize"])
    with RawSession(fake_server.url) as raw:
        first = raw.initialize()
        assert first.status == 503 and "mcp-session-id" not in first.headers
        assert fake_server.stats()["session_ids_issued"] == []
        second = raw.initialize()
        assert second.status == 200 and raw.session_id
    assert fake_server.stats()["initialize_calls"] == 2


def test_fail_methods_can_target_listing_and_ping(
    fake_server: FakeServer, session: RawSession
) -> None:
    fake_server.configure(
        fail_next=2, fail_with="jsonrpc:-32603", fail_methods=["tools/list", "ping"]
    )
    assert session.request("tools/list").error["code"] == -32603
    assert session.request("ping").error["code"] == -32603
    assert "tools" in session.request("tools/list").result


def test_mcp_level_faults_skip_notifications_but_http_faults_hit_them(
    fake_server: FakeServer, session: RawSession
) -> None:
    fake_server.configure(fail_next=1, fail_with="hang", fail_methods=["notifications/initialized"])
    assert session.notify("notifications/initialized").status == 202
    assert fake_server.knobs()["fail_next"] == 1
    fake_server.configure(fail_with="http500")
    assert session.notify("notifications/initialized").status == 500


def test_fail_tools_limits_faults_to_named_tools(
    fake_server: FakeServer, session: RawSession, sample: str
) -> None:
    fake_server.configure(fail_next=-1, fail_with="is_error", fail_tools=[EXPORT])
    converted = session.call_tool(CONVERT, {"source": sample}).result
    assert converted["isError"] is False
    key = converted["structuredContent"]["document_key"]
    assert session.call_tool(EXPORT, {"document_key": key}).result["isError"] is True
    assert session.call_tool("list_cached_documents", {}).result["isError"] is False


@pytest.mark.parametrize("code", [-32700, -32600, -32601, -32602, -32603, -32000, -32001,
                                  -32002, -32003, -32099, -31999])  # fmt: skip
def test_jsonrpc_faults_answer_with_the_code_for_the_request(
    fake_server: FakeServer, session: RawSession, sample: str, code: int
) -> None:
    fake_server.configure(fail_next=1, fail_with=f"jsonrpc:{code}")
    reply = session.call_tool(CONVERT, {"source": sample})
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    assert reply.response_id == session.last_id
    assert reply.error == {"code": code, "message": f"injected JSON-RPC error {code}"}


def test_jsonrpc_fault_message_is_configurable(
    fake_server: FakeServer, session: RawSession, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="jsonrpc:-32002", fail_message="conversion failed")
    error = session.call_tool(CONVERT, {"source": sample}).error
    assert error == {"code": -32002, "message": "conversion failed"}


def test_is_error_fault_returns_a_failed_tool_result_without_running_the_tool(
    fake_server: FakeServer, session: RawSession, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="is_error")
    result = session.call_tool(CONVERT, {"source": sample}).result
    assert result == {
        "content": [{"type": "text", "text": f"Error executing tool {CONVERT}"}],
        "isError": True,
    }
    assert fake_server.stats()["cached_documents"] == []


def test_bad_output_fault_runs_the_tool_and_breaks_its_structured_content(
    fake_server: FakeServer, session: RawSession, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="bad_output")
    result = session.call_tool(CONVERT, {"source": sample}).result
    assert result["structuredContent"] == {"from_cache": [], "document_key": []}
    assert result.get("isError") is not True
    assert len(fake_server.stats()["cached_documents"]) == 1  # the tool really ran
    healed = session.call_tool(CONVERT, {"source": sample}).result
    assert isinstance(healed["structuredContent"]["document_key"], str)


def test_garbage_faults_send_unparseable_bodies(
    fake_server: FakeServer, session: RawSession, sample: str
) -> None:
    fake_server.configure(fail_next=1, fail_with="garbage")
    reply = session.call_tool(CONVERT, {"source": sample})
    assert reply.status == 200 and reply.content_type == "application/json"
    with pytest.raises(ValueError):
        json.loads(reply.text)

    fake_server.configure(fail_next=1, fail_with="garbage_sse")
    reply = session.call_tool(CONVERT, {"source": sample})
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    assert [event.event for event in reply.events] == ["message"]
    with pytest.raises(ValueError):
        json.loads(reply.events[0].data)
    assert reply.response is None


def test_http_faults_can_target_get_and_delete(
    fake_server: FakeServer, session: RawSession
) -> None:
    fake_server.configure(fail_next=1, fail_with="http503", fail_methods=["GET"])
    assert session.resume("ev-1").status == 503
    fake_server.configure(fail_next=1, fail_with="http500", fail_methods=["DELETE"])
    assert session.delete().status_code == 500
    assert session.delete().status_code == 200
    assert fake_server.stats()["deletes"] == 2


def test_require_auth_bearer(fake_server: FakeServer, sample: str) -> None:
    fake_server.configure(require_auth={"bearer": "s3cret"})
    with RawSession(fake_server.url) as anonymous:
        refused = anonymous.initialize()
        assert refused.status == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    with RawSession(fake_server.url, headers={"authorization": "Bearer wrong"}) as wrong:
        assert wrong.initialize().status == 401
    with RawSession(fake_server.url, headers={"authorization": "Bearer s3cret"}) as allowed:
        assert allowed.initialize().status == 200
        assert allowed.call_tool(CONVERT, {"source": sample}).result["isError"] is False
    stats = fake_server.stats()
    assert stats["auth_rejections"] == 2
    assert stats["last_headers_by_method"]["tools/call"]["authorization"] == "Bearer s3cret"


def test_require_auth_api_key_header(fake_server: FakeServer) -> None:
    fake_server.configure(require_auth={"header": "X-API-Key", "value": "k1"})
    with RawSession(fake_server.url) as anonymous:
        assert anonymous.initialize().status == 401
    with RawSession(fake_server.url, headers={"X-API-Key": "k1"}) as allowed:
        assert allowed.initialize().status == 200


def test_forget_sessions_makes_old_session_ids_404(fake_server: FakeServer, sample: str) -> None:
    fake_server.forget_sessions()  # sessions earlier tests left open
    with RawSession(fake_server.url) as first, RawSession(fake_server.url) as second:
        first.initialize()
        second.initialize()
        assert fake_server.forget_sessions() == 2
        for raw in (first, second):
            reply = raw.call_tool(CONVERT, {"source": sample})
            assert reply.status == 404
            assert json.loads(reply.text)["error"]["message"] == "Session not found"
        first.session_id = None
        assert first.initialize().status == 200
        assert first.call_tool(CONVERT, {"source": sample}).status == 200
    assert fake_server.stats()["deletes"] == 0  # the fake's own DELETEs are not client requests


def test_handshake_can_drop_the_tools_capability_and_force_a_version(
    fake_server: FakeServer,
) -> None:
    with RawSession(fake_server.url) as raw:
        normal = raw.initialize().result
    assert normal["capabilities"]["tools"] == {"listChanged": False}
    assert normal["protocolVersion"] == "2025-11-25"
    assert normal["serverInfo"] == {"name": "docling", "version": ""}

    fake_server.configure(no_tools_capability=True, protocol_version="2025-06-18")
    with RawSession(fake_server.url) as raw:
        shaped = raw.initialize().result
    assert "tools" not in shaped["capabilities"] and "prompts" in shaped["capabilities"]
    assert shaped["protocolVersion"] == "2025-06-18"


def test_sdk_client_sees_the_forced_protocol_version(fake_server: FakeServer) -> None:
    async def version() -> str:
        async with Client(fake_server.url, mode="legacy") as client:
            return client.protocol_version

    fake_server.configure(protocol_version="2025-03-26")
    assert anyio.run(version) == "2025-03-26"
    fake_server.configure(protocol_version="1999-01-01")
    with pytest.raises(BaseExceptionGroup) as refused:
        anyio.run(version)
    assert refused.group_contains(RuntimeError, match="Unsupported protocol version.*1999-01-01")
