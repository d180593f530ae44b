"""Calls keep their connection alive, and finished requests leave nothing behind in the client.

A request's SSE reply is read to its end once the response arrived (the server closes it right
after), so httpx can put the connection back in its pool: before, every call paid for a new TCP
connection. The watchdog forgets the alarm of each finished request instead of keeping it
until its deadline (minutes away), so a long-running worker's heap does not grow per call.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from typing import Any

import httpx
import pytest

from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.streamable_http import StreamableHttpTransport
from pipeline.mcp.transport import Binding, Outgoing
from pipeline.mcp.watchdog import _WATCHDOG
from tests.fixtures.fake_server import FakeServer

TOOL = "check_document_in_local_cache"
CALLS = 20


def _client(fake_server: FakeServer, settings: McpSettings, ports: list[str]) -> McpClient:
    """A client whose HTTP client records the local address every response arrived on."""

    def record(response: httpx.Response) -> None:
        stream = response.extensions["network_stream"]
        ports.append(str(stream.get_extra_info("client_addr")))

    http = httpx.Client(event_hooks={"response": [record]})
    transport = StreamableHttpTransport(fake_server.url, http_client=http)
    return McpClient(settings=settings, transport=transport)


@pytest.mark.parametrize("reply", ["sse", "json"])
def test_sequential_calls_share_one_connection(
    fake_server: FakeServer, settings: McpSettings, reply: str
) -> None:
    fake_server.configure(json_response=reply == "json")
    ports: list[str] = []
    with _client(fake_server, settings, ports) as client:
        client.initialize()
        ports.clear()
        for _ in range(CALLS):
            result = client.call_tool(TOOL, {"document_key": "abc"})
            assert not result.is_error and result.structured == {"in_cache": False}
    assert len(ports) >= CALLS  # the calls, and the DELETE that ends the session
    assert len(set(ports)) == 1, f"{len(set(ports))} connections for {CALLS} calls"


def test_a_server_that_keeps_answered_streams_open_is_not_waited_for_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The end of an answered stream is waited for briefly, once: a server that never ends
    its streams still gets every call answered, each on a connection of its own."""
    caplog.set_level(logging.INFO, logger="doclane.mcp.http")
    with _StreamHoldingServer() as server:
        transport = StreamableHttpTransport(server.url)
        try:
            for request_id in (1, 2, 3):
                received: list[dict[str, Any]] = []
                message = {"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": {}}
                transport.post(
                    Outgoing(
                        message,
                        Binding(),
                        30,
                        sink=lambda item, into=received: bool(into.append(item)) or True,
                    )
                )
                assert received == [{"jsonrpc": "2.0", "id": request_id, "result": {}}]
        finally:
            transport.close()
        assert server.connections == 3
    given_up = [r for r in caplog.records if "keeps answered streams open" in r.getMessage()]
    assert len(given_up) == 1


class _StreamHoldingServer:
    """HTTP/1.1 on a socket: answers each POST with an SSE event, then never ends the stream."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/mcp"
        self.connections = 0
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> _StreamHoldingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for conn in self._open:
            conn.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed: the test is over
                return
            self.connections += 1
            self._open.append(conn)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += conn.recv(65536)
            request_id = json.loads(body)["id"]
            event = f'event: message\ndata: {{"jsonrpc":"2.0","id":{request_id},"result":{{}}}}\n\n'
            chunk = f"{len(event):x}\r\n{event}\r\n".encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunk
            )


def test_finished_requests_leave_no_alarm_behind(
    fake_server: FakeServer, settings: McpSettings
) -> None:
    ports: list[str] = []
    with _client(fake_server, settings, ports) as client:
        client.initialize()
        for _ in range(CALLS):
            client.call_tool(TOOL, {"document_key": "abc"})
        assert len(_WATCHDOG._heap) <= 2  # the last request's alarm, at most
