"""Every E2xx/E3xx code the client raises, each produced from its real trigger on the wire.

(E309, the open circuit, belongs to the resilience layer and is tested there.)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from errors import PipelineError, classify
from pipeline.mcp.auth import ApiKeyAuth, BearerAuth
from pipeline.mcp.client import McpClient
from tests.fixtures.fake_server import FakeServer
from tests.support.mcp_clients import CONVERT, EXPORT, MakeClient

SECRET = "s3cr3t-token-0c1d"


def call_error(client: McpClient, tool: str = CONVERT, **arguments: Any) -> PipelineError:
    with pytest.raises(PipelineError) as caught:
        client.call_tool(tool, arguments or {"source": "/nonexistent/x.docx"})
    return caught.value


def inject(server: FakeServer, fault: str, **more: Any) -> None:
    server.configure(fail_next=1, fail_with=fault, **more)


# --- E2xx: the JSON-RPC layer ---------------------------------------------------------------


@pytest.mark.parametrize("fault", ["garbage", "garbage_sse"])
def test_E200_unparseable_reply(client: McpClient, fake_server: FakeServer, fault: str) -> None:
    inject(fake_server, fault)
    error = call_error(client)
    assert error.code == "E200" and not error.retryable


@pytest.mark.parametrize(
    ("code", "catalog"),
    [(-32700, "E200"), (-32600, "E201"), (-32601, "E202"), (-32602, "E203"), (-32603, "E204"),
     (-32099, "E299"), (-32000, "E302"), (-32001, "E303"), (-32002, "E306"), (-32003, "E307")],
)  # fmt: skip
def test_jsonrpc_errors_from_the_server(
    client: McpClient, fake_server: FakeServer, code: int, catalog: str
) -> None:
    inject(fake_server, f"jsonrpc:{code}", fail_message=f"the server says {code}")
    error = call_error(client)
    assert (error.code, error.jsonrpc_code) == (catalog, code)
    assert f"the server says {code}" in error.message


def test_E202_no_mcp_endpoint_at_that_path(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    client = make_client(fake_server.origin + "/not-mcp")
    with pytest.raises(PipelineError) as caught:
        client.initialize()
    assert caught.value.code == "E202" and caught.value.http_status == 404


def test_E203_local_schema_check_sends_nothing(client: McpClient, fake_server: FakeServer) -> None:
    error = call_error(client, CONVERT, source=42)
    assert error.code == "E203" and "'source'" in error.message
    assert error.detail["field"] == "source"
    assert CONVERT not in fake_server.stats()["requests_by_tool"]


def test_E204_internal_error_is_retryable(client: McpClient, fake_server: FakeServer) -> None:
    inject(fake_server, "jsonrpc:-32603")
    error = call_error(client)
    assert error.code == "E204" and error.retryable and error.trips_breaker


# --- E3xx: the MCP conversation ----------------------------------------------------------------


def test_E301_before_initialize_and_after_close(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    client = make_client()
    assert call_error(client).code == "E301"
    client.initialize()
    client.close()
    assert call_error(client).code == "E301"
    assert fake_server.stats()["requests_by_method"].get("tools/call", 0) == 0


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_E302_http_status(client: McpClient, fake_server: FakeServer, status: int) -> None:
    inject(fake_server, f"http{status}", retry_after_s=7)
    error = call_error(client)
    assert (error.code, error.http_status, error.retryable) == ("E302", status, True)
    if status == 429:
        assert error.retry_after == 7


def test_E302_server_down(make_client: MakeClient, fake_server: FakeServer) -> None:
    client = make_client()
    client.initialize()
    fake_server.stop()
    error = call_error(client)
    assert error.code == "E302" and "cannot reach" in error.message
    fake_server.start()


def test_E302_nothing_listening(make_client: MakeClient) -> None:
    client = make_client("http://127.0.0.1:1/mcp")
    with pytest.raises(PipelineError) as caught:
        client.initialize()
    assert caught.value.code == "E302"


def test_E303_deadline(client: McpClient, fake_server: FakeServer) -> None:
    inject(fake_server, "hang")
    with pytest.raises(PipelineError) as caught:
        client.call_tool(CONVERT, {"source": "/x.docx"}, timeout=0.3)
    assert caught.value.code == "E303" and caught.value.retryable


def test_E304_unknown_tool(client: McpClient, fake_server: FakeServer) -> None:
    error = call_error(client, "convert_pdf", file_path="/x.pdf")
    assert error.code == "E304" and "convert_pdf" in error.message
    assert fake_server.stats()["requests_by_tool"] == {}


def test_E305_no_tools_capability(make_client: MakeClient, fake_server: FakeServer) -> None:
    fake_server.configure(no_tools_capability=True)
    with pytest.raises(PipelineError) as caught:
        make_client().initialize()
    assert caught.value.code == "E305" and "tools capability" in caught.value.message
    assert fake_server.stats()["deletes"] == 1  # the half-made session was ended


def test_E305_unsupported_protocol_version(
    make_client: MakeClient, fake_server: FakeServer
) -> None:
    fake_server.configure(protocol_version="2024-11-05")
    with pytest.raises(PipelineError) as caught:
        make_client().initialize()
    assert caught.value.code == "E305" and "2024-11-05" in caught.value.message


def test_E306_conversion_failed(client: McpClient, tmp_path: Path) -> None:
    result = client.call_tool(CONVERT, {"source": str(tmp_path / "missing.docx")})
    error = classify(result.raw, stage="convert")
    assert error.code == "E306" and CONVERT in error.message


def test_E306_injected_is_error(client: McpClient, fake_server: FakeServer, docx: str) -> None:
    inject(fake_server, "is_error", fail_message="boom")
    result = client.call_tool(CONVERT, {"source": docx})
    assert result.is_error and classify(result.raw).code == "E306"


def test_E307_export_failed(client: McpClient) -> None:
    result = client.call_tool(EXPORT, {"document_key": "0" * 32})
    assert result.is_error
    assert classify(result.raw, stage="export").code == "E307"


def test_E307_after_eviction(client: McpClient, fake_server: FakeServer, docx: str) -> None:
    converted = client.call_tool(CONVERT, {"source": docx})
    assert converted.structured is not None
    fake_server.evict()
    result = client.call_tool(EXPORT, {"document_key": converted.structured["document_key"]})
    assert classify(result.raw, stage="export").code == "E307"


def test_E308_session_lost_and_reinitialize_failed(
    client: McpClient, fake_server: FakeServer
) -> None:
    fake_server.forget_sessions()
    fake_server.configure(fail_next=-1, fail_with="http502", fail_methods=["initialize"])
    error = call_error(client)
    assert error.code == "E308" and error.http_status == 404 and error.retryable


@pytest.mark.parametrize(
    ("rule", "auth"),
    [
        ({"bearer": SECRET}, None),
        ({"bearer": SECRET}, BearerAuth("wrong-token")),
        ({"header": "X-API-Key", "value": SECRET}, ApiKeyAuth("wrong-key")),
    ],
)
def test_E310_unauthorized(
    make_client: MakeClient, fake_server: FakeServer, rule: dict[str, str], auth: Any
) -> None:
    fake_server.configure(require_auth=rule)
    with pytest.raises(PipelineError) as caught:
        make_client(auth=auth).initialize()
    assert caught.value.code == "E310" and caught.value.http_status == 401
    assert not caught.value.retryable


@pytest.mark.parametrize(
    ("rule", "auth"),
    [
        ({"bearer": SECRET}, BearerAuth(SECRET)),
        ({"header": "X-Docling-Key", "value": SECRET}, ApiKeyAuth(SECRET, "X-Docling-Key")),
    ],
)
def test_right_credentials_work_and_never_show(
    make_client: MakeClient,
    fake_server: FakeServer,
    caplog: pytest.LogCaptureFixture,
    rule: dict[str, str],
    auth: Any,
    docx: str,
) -> None:
    fake_server.configure(require_auth=rule)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    client = make_client(auth=auth)
    client.initialize()
    assert not client.call_tool(CONVERT, {"source": docx}).is_error
    fake_server.configure(require_auth={"bearer": "rotated"})  # now the secret is refused
    error = call_error(client)
    assert error.code == "E310"
    client.close()
    shown = [caplog.text, str(error), repr(error.to_dict()), client.trail_text(), repr(client)]
    for text in shown:
        assert SECRET not in text
    assert fake_server.stats()["auth_rejections"] >= 1


def test_E311_a_reply_that_breaks_the_output_schema(
    client: McpClient, fake_server: FakeServer, docx: str
) -> None:
    inject(fake_server, "bad_output")
    error = call_error(client, CONVERT, source=docx)
    assert error.code == "E311"
    assert error.detail["field"] in ("document_key", "from_cache")
