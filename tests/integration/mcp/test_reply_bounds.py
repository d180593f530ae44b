"""A server's reply is read up to DOCLANE_MCP_MAX_REPLY_BYTES and no further (E312).

The fake streams a tools/call result of 20 MB, as one SSE event or one JSON body, without ever
holding it whole; the client's bound is 1 MiB. Memory while refusing is measured in bench/
(``bench/mcp_reply_bound.py``), not here: what this proves is that the client stops at the
bound with E312, says the limit, and that the session is still usable afterwards.
"""

from __future__ import annotations

import pytest

from errors import ReplyTooLarge
from pipeline.mcp.settings import McpSettings
from tests.fixtures.fake_server import FakeServer
from tests.support.mcp_clients import CONVERT, MakeClient

LIMIT = 1024 * 1024


@pytest.mark.parametrize("shape", ["sse", "json"])
def test_a_reply_over_the_bound_is_E312(
    make_client: MakeClient, fake_server: FakeServer, docx: str, shape: str
) -> None:
    client = make_client(settings=McpSettings(max_reply_bytes=LIMIT, request_timeout_s=10))
    client.initialize()
    fake_server.configure(oversize_reply_bytes=20 * LIMIT, oversize_as=shape)
    with pytest.raises(ReplyTooLarge) as caught:
        client.call_tool(CONVERT, {"source": docx}, timeout=60)
    error = caught.value
    assert error.code == "E312"
    assert not error.retryable and not error.trips_breaker
    assert str(LIMIT) in error.message and "DOCLANE_MCP_MAX_REPLY_BYTES" in error.message
    assert "DOCLANE_MCP_MAX_REPLY_BYTES" in error.action
    fake_server.configure(oversize_reply_bytes=None)
    assert not client.call_tool(CONVERT, {"source": docx}).is_error


def test_a_reply_under_the_bound_is_read_whole(
    make_client: MakeClient, fake_server: FakeServer, docx: str
) -> None:
    client = make_client(settings=McpSettings(max_reply_bytes=LIMIT, request_timeout_s=10))
    client.initialize()
    fake_server.configure(oversize_reply_bytes=LIMIT - 1000)
    # A tool without an outputSchema, so a plain text result is a valid answer.
    result = client.call_tool("get_page_thumbnail", {"document_key": "k"}, timeout=60)
    assert not result.is_error
    assert len(result.text) == LIMIT - 1000
