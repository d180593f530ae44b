"""The lifecycle state machine and the handshake that drives it."""

from __future__ import annotations

import threading

import pytest

from errors import CallTimeout, MissingCapability, NotInitialized, ServerUnavailable
from pipeline import __version__
from pipeline.mcp.lifecycle import (
    ALLOWED,
    IllegalTransition,
    Lifecycle,
    LifecycleState,
    format_trail,
)
from pipeline.mcp.settings import McpSettings
from tests.support.scripted_mcp import MakeClient, ScriptedServer

S = LifecycleState


def test_state_machine_allows_only_its_transitions() -> None:
    lifecycle = Lifecycle()
    with pytest.raises(IllegalTransition):
        lifecycle.move(S.READY, "skipping the handshake")
    lifecycle.move(S.INITIALIZING, "go")
    lifecycle.move(S.READY, "done")
    with pytest.raises(IllegalTransition):
        lifecycle.move(S.INITIALIZING, "again")
    lifecycle.move(S.CLOSED, "bye")
    for target in S:
        with pytest.raises(IllegalTransition):
            lifecycle.move(target, "closed is final")
    assert ALLOWED[S.CLOSED] == frozenset()


def test_trail_records_every_transition_with_times_and_reason() -> None:
    lifecycle = Lifecycle()
    lifecycle.move(S.INITIALIZING, "first")
    lifecycle.move(S.NEW, "failed: E302")
    lifecycle.move(S.INITIALIZING, "second")
    lifecycle.move(S.READY, "ok")
    trail = lifecycle.trail
    assert [(t.from_state, t.to_state, t.reason) for t in trail] == [
        (S.NEW, S.INITIALIZING, "first"),
        (S.INITIALIZING, S.NEW, "failed: E302"),
        (S.NEW, S.INITIALIZING, "second"),
        (S.INITIALIZING, S.READY, "ok"),
    ]
    assert [t.monotonic for t in trail] == sorted(t.monotonic for t in trail)
    assert all(t.wall.tzinfo is not None for t in trail)
    text = format_trail(trail)
    assert text.count("\n") == 3 and "failed: E302" in text and "initializing -> ready" in text
    assert trail[-1].to_dict()["to"] == "ready"


def test_initialize_runs_the_handshake_in_order(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client()
    assert client.state is S.NEW
    info = client.initialize()
    assert client.state is S.READY
    assert info.name == "scripted" and info.protocol_version == "2025-11-25"
    methods = [p.message.get("method") for p in server.posts]
    assert methods == ["initialize", "notifications/initialized", "tools/list"]
    init = server.posts[0]
    assert init.binding.session_id is None and init.binding.protocol_version is None
    assert init.message["params"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "doclane", "version": __version__},
    }
    # After the answer, every message carries the session and the negotiated version.
    for post in server.posts[1:]:
        assert post.binding.session_id == "sid-1"
        assert post.binding.protocol_version == "2025-11-25"
    assert [t.to_state for t in client.trail] == [S.INITIALIZING, S.READY]
    assert "sid-1" in client.trail[-1].reason and "2 tools" in client.trail[-1].reason


def test_initialize_is_idempotent_and_thread_safe(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client()
    barrier = threading.Barrier(8)
    results = []

    def init() -> None:
        barrier.wait()
        results.append(client.initialize())

    threads = [threading.Thread(target=init) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.initialize()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert len(server.sent("initialize")) == 1
    assert len(client.trail) == 2


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_accepts_the_supported_answers(
    make_client: MakeClient, server: ScriptedServer, version: str
) -> None:
    server.protocol_answer = version
    client = make_client()
    client.initialize()
    assert client.negotiated_version == version
    assert server.posts[-1].binding.protocol_version == version


@pytest.mark.parametrize("version", ["2024-11-05", "1999-01-01", "2026-07-28"])
def test_other_protocol_answers_are_E305_and_the_session_is_ended(
    make_client: MakeClient, server: ScriptedServer, version: str
) -> None:
    server.protocol_answer = version
    client = make_client()
    with pytest.raises(MissingCapability) as caught:
        client.initialize()
    assert caught.value.code == "E305" and version in caught.value.message
    assert client.state is S.NEW
    assert [d.session_id for d in server.deletes] == ["sid-1"]
    assert not server.sent("tools/list")


def test_missing_tools_capability_is_E305_unless_relaxed(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    server.capabilities = {}
    with pytest.raises(MissingCapability, match="no tools capability"):
        make_client().initialize()
    relaxed = make_client(require_tools=False)
    relaxed.initialize()
    assert relaxed.state is S.READY
    assert relaxed.tools() == []


def test_protocol_version_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, make_client: MakeClient, server: ScriptedServer
) -> None:
    monkeypatch.setenv("MCP_PROTOCOL_VERSION", "2025-06-18")
    client = make_client(settings=McpSettings.from_environment())
    client.initialize()
    assert server.posts[0].message["params"]["protocolVersion"] == "2025-06-18"
    assert client.negotiated_version == "2025-06-18"


def test_a_failed_initialize_returns_to_new_and_can_be_retried(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    server.initialize_failures = [ServerUnavailable("HTTP 503", http_status=503)]
    client = make_client()
    with pytest.raises(ServerUnavailable):
        client.initialize()
    assert client.state is S.NEW
    assert "initialize failed: E302" in client.trail[-1].reason
    client.initialize()
    assert client.state is S.READY
    assert [t.to_state for t in client.trail] == [S.INITIALIZING, S.NEW, S.INITIALIZING, S.READY]


def test_calls_before_ready_or_after_close_are_E301(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client()
    for attempt in (
        lambda: client.call_tool("echo", {"text": "x"}),
        client.tools,
        client.ping,
        lambda: client.tool("echo"),
    ):
        with pytest.raises(NotInitialized, match="initialize"):
            attempt()
    assert server.posts == []  # nothing went out, and the client did not initialize itself
    client.initialize()
    client.close()
    with pytest.raises(NotInitialized, match="closed"):
        client.call_tool("echo", {"text": "x"})
    with pytest.raises(NotInitialized, match="closed"):
        client.initialize()


def test_close_deletes_the_session_once_and_closes_the_transport(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client()
    client.initialize()
    client.close()
    client.close()
    assert [d.session_id for d in server.deletes] == ["sid-1"]
    assert server.closed
    assert client.state is S.CLOSED and client.trail[-1].reason == "close()"


def test_context_manager_closes(make_client: MakeClient, server: ScriptedServer) -> None:
    with make_client() as client:
        client.initialize()
    assert client.state is S.CLOSED and server.closed


def test_handshake_timeout_leaves_the_client_new(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    server.initialize_failures = [CallTimeout("initialize: no answer within 30s")]
    client = make_client()
    with pytest.raises(CallTimeout):
        client.initialize()
    assert client.state is S.NEW
