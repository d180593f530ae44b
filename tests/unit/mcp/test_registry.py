"""The tool registry: TTL, hit/miss counters, invalidation, pagination, unknown tools."""

from __future__ import annotations

import threading

import pytest

from errors import ParseError, UnknownTool
from pipeline.mcp.client import McpClient
from pipeline.mcp.protocol import Tool
from pipeline.mcp.registry import ToolRegistry
from tests.support.scripted_mcp import MakeClient, ScriptedServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tools(*names: str) -> list[Tool]:
    return [Tool.from_wire({"name": n, "inputSchema": {"type": "object"}}) for n in names]


def test_ttl_hits_and_misses() -> None:
    clock = Clock()
    loads: list[int] = []

    def load() -> list[Tool]:
        loads.append(1)
        return tools("a", "b")

    registry = ToolRegistry(ttl=300, clock=clock)
    assert registry.get("a", load).name == "a"  # empty: a miss that loads
    clock.now += 299
    assert registry.get("b", load).name == "b"  # fresh: a hit
    clock.now += 1
    registry.get("a", load)  # expired at exactly the TTL: a miss
    stats = registry.stats()
    assert (stats.hits, stats.misses, stats.refreshes, len(loads)) == (1, 2, 2, 2)
    assert stats.size == 2 and stats.fresh and stats.age_s == 0


def test_invalidation_forces_one_refresh() -> None:
    registry = ToolRegistry(ttl=300, clock=Clock())
    registry.replace(tools("a"))
    registry.invalidate()
    assert not registry.fresh
    assert [t.name for t in registry.all(lambda: tools("a", "c"))] == ["a", "c"]
    assert registry.fresh
    assert registry.stats().invalidations == 1


def test_unknown_tool_is_E304_with_the_alternatives() -> None:
    registry = ToolRegistry(ttl=300, clock=Clock())
    with pytest.raises(UnknownTool) as caught:
        registry.get("nope", lambda: tools("a", "b"))
    assert caught.value.code == "E304" and "'nope'" in caught.value.message
    assert caught.value.detail["available"] == ["a", "b"]


def test_concurrent_lookups_of_a_stale_list_refresh_once() -> None:
    registry = ToolRegistry(ttl=300, clock=Clock())
    started = threading.Event()
    release = threading.Event()
    loads: list[int] = []

    def slow_load() -> list[Tool]:
        loads.append(1)
        started.set()
        release.wait(5)
        return tools("a")

    threads = [threading.Thread(target=registry.get, args=("a", slow_load)) for _ in range(6)]
    for thread in threads:
        thread.start()
    assert started.wait(5)
    release.set()
    for thread in threads:
        thread.join(5)
    assert len(loads) == 1
    assert registry.stats().misses == 6  # every lookup found it stale; one refreshed it


def test_the_client_refreshes_an_expired_list(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client(registry_ttl=0)  # always stale: every lookup refetches
    client.initialize()
    client.call_tool("echo", {"text": "x"})
    client.call_tool("echo", {"text": "y"})
    assert len(server.sent("tools/list")) == 3
    assert client.registry_stats().misses == 2


def test_list_changed_invalidates_and_the_next_call_refetches(
    client: McpClient, server: ScriptedServer
) -> None:
    server.before_response = [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
    client.call_tool("echo", {"text": "x"})
    assert not client.registry_stats().fresh
    server.before_response = []
    server.tools.append({"name": "new_tool", "inputSchema": {"type": "object"}})
    server.scripts["new_tool"] = server.scripts["plain"]
    assert client.call_tool("new_tool", {}).text == "plain"
    assert len(server.sent("tools/list")) == 2
    assert client.registry_stats().invalidations == 1


def test_cached_lookups_are_hits(client: McpClient, server: ScriptedServer) -> None:
    for _ in range(5):
        client.call_tool("echo", {"text": "x"})
    stats = client.registry_stats()
    assert stats.hits == 5 and stats.misses == 0
    assert len(server.sent("tools/list")) == 1


def test_unknown_tool_sends_nothing(client: McpClient, server: ScriptedServer) -> None:
    with pytest.raises(UnknownTool):
        client.call_tool("no_such_tool", {})
    assert server.sent("tools/call") == []


def test_pagination_follows_next_cursor_to_the_end(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    server.tools = [{"name": f"tool_{n}", "inputSchema": {"type": "object"}} for n in range(7)]
    server.page_size = 3
    client = make_client()
    client.initialize()
    assert [t.name for t in client.tools()] == [f"tool_{n}" for n in range(7)]
    cursors = [p.message["params"].get("cursor") for p in server.sent("tools/list")]
    assert cursors == [None, "3", "6"]


def test_a_repeating_cursor_is_E200(make_client: MakeClient, server: ScriptedServer) -> None:
    server._tools_page = lambda cursor: {"tools": [], "nextCursor": "again"}  # type: ignore[method-assign]
    with pytest.raises(ParseError, match="repeated the cursor"):
        make_client().initialize()


@pytest.mark.parametrize(
    "bad",
    [{"tools": "nope"}, {"tools": [{"no": "name"}]}, {"tools": [{"name": "x", "inputSchema": 3}]}],
)
def test_malformed_listings_are_E200(
    make_client: MakeClient, server: ScriptedServer, bad: dict[str, object]
) -> None:
    server._tools_page = lambda cursor: bad  # type: ignore[method-assign,assignment,return-value]
    with pytest.raises(ParseError):
        make_client().initialize()


def test_tool_summary_is_the_first_description_line(client: McpClient) -> None:
    assert client.tool("echo").summary == "Echo the text back."
    assert client.tool("plain").summary == ""


def test_a_change_announced_during_a_refresh_is_not_lost() -> None:
    """list_changed arriving while tools/list is on the wire: that list may predate the change."""
    registry = ToolRegistry(ttl=300, clock=Clock())
    versions = iter([tools("old"), tools("old"), tools("new")])

    def load_while_the_server_changes() -> list[Tool]:
        listed = next(versions)
        if registry.stats().refreshes == 1:  # the second fetch: the change comes in meanwhile
            registry.invalidate()
        return listed

    registry.replace(next(versions))
    registry.invalidate()  # the first announcement
    assert registry.get("old", load_while_the_server_changes).name == "old"
    assert not registry.fresh  # the second announcement was not swallowed by the refresh
    assert registry.get("new", load_while_the_server_changes).name == "new"
    assert registry.fresh


def test_the_handshake_keeps_a_change_announced_during_it(
    server: ScriptedServer, make_client: MakeClient
) -> None:
    """A list_changed on the handshake's own tools/list stream leaves the registry stale."""
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    server.notify_during["tools/list"] = [changed]
    client = make_client()
    client.initialize()
    stats = client.registry_stats()
    assert stats.invalidations == 1 and not stats.fresh
