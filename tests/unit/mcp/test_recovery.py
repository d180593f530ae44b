"""HTTP 404 on a session: re-initialize once, transparently, and resend; else E308."""

from __future__ import annotations

import threading

import pytest

from errors import ServerUnavailable, SessionExpired
from pipeline.mcp.client import McpClient
from pipeline.mcp.lifecycle import LifecycleState
from pipeline.mcp.transport import Outgoing, Reply
from tests.support.scripted_mcp import ScriptedServer

S = LifecycleState


def test_a_forgotten_session_is_reestablished_and_the_call_resent(
    client: McpClient, server: ScriptedServer
) -> None:
    server.forget_sessions()
    assert client.call_tool("echo", {"text": "again"}).text == "again"
    assert client.session_id == "sid-2"
    assert len(server.sent("initialize")) == 2
    calls = server.sent("tools/call")
    assert [c.binding.session_id for c in calls] == ["sid-1", "sid-2"]
    assert calls[0].message["id"] != calls[1].message["id"]  # ids stay unique per client
    assert [t.to_state for t in client.trail] == [S.INITIALIZING, S.READY, S.REINITIALIZING,
                                                  S.READY]  # fmt: skip
    assert "HTTP 404" in client.trail[2].reason and "sid-1" in client.trail[2].reason
    assert client.trail[3].reason.startswith("re-initialized")


def test_ping_and_listing_recover_too(client: McpClient, server: ScriptedServer) -> None:
    server.forget_sessions()
    client.ping()
    server.forget_sessions()
    client._registry.invalidate()
    assert len(client.tools()) == 2
    assert len(server.sent("initialize")) == 3


def test_a_failed_reinitialize_is_E308_and_the_next_call_tries_again(
    client: McpClient, server: ScriptedServer
) -> None:
    server.forget_sessions()
    server.initialize_failures = [ServerUnavailable("HTTP 503", http_status=503)]
    with pytest.raises(SessionExpired) as caught:
        client.call_tool("echo", {"text": "x"})
    assert caught.value.code == "E308" and caught.value.retryable
    assert "E302" in caught.value.message
    assert caught.value.detail["cause"]["code"] == "E302"
    assert client.state is S.REINITIALIZING
    assert "re-initialize failed: E302" in client.trail[-1].reason
    # The retry the resilience layer will make: the client re-initializes before sending.
    assert client.call_tool("echo", {"text": "later"}).text == "later"
    assert client.state is S.READY


def test_reinitialize_happens_only_once_per_request(
    client: McpClient, server: ScriptedServer
) -> None:
    original = server.post

    def forgetful_post(outgoing: Outgoing) -> Reply:
        reply = original(outgoing)
        if outgoing.message.get("method") == "tools/list":
            server.forget_sessions()  # the new session is forgotten right after the handshake
        return reply

    server.post = forgetful_post  # type: ignore[method-assign]
    server.forget_sessions()
    with pytest.raises(SessionExpired, match="forgot the new session as well"):
        client.call_tool("echo", {"text": "x"})
    assert len(server.sent("initialize")) == 2


def test_many_threads_losing_the_session_reinitialize_once(
    client: McpClient, server: ScriptedServer
) -> None:
    server.forget_sessions()
    barrier = threading.Barrier(8)
    texts: list[str] = []

    def call(n: int) -> None:
        barrier.wait()
        texts.append(client.call_tool("echo", {"text": str(n)}).text)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(texts) == sorted(str(n) for n in range(8))
    assert len(server.sent("initialize")) == 2
    assert [t.to_state for t in client.trail].count(S.REINITIALIZING) == 1


def test_initialize_while_reinitializing_recovers(
    client: McpClient, server: ScriptedServer
) -> None:
    server.forget_sessions()
    server.initialize_failures = [ServerUnavailable("down")]
    with pytest.raises(SessionExpired):
        client.ping()
    client.initialize()
    assert client.state is S.READY and client.session_id == "sid-2"
