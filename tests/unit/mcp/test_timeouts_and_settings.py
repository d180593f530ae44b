"""Size tiers, the settings that configure them, and endpoint handling."""

from __future__ import annotations

import pytest

from errors import InvalidSetting
from pipeline.mcp.client import McpClient
from pipeline.mcp.endpoints import normalize_endpoint, origin_of
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.timeouts import CallTimeouts
from pipeline.settings.tree import read_settings
from pipeline.support.secrets import mask_address
from tests.support.scripted_mcp import MakeClient, ScriptedServer

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("size", "tier", "seconds"),
    [
        (0, "small", 60.0),
        (10 * MIB - 1, "small", 60.0),
        (10 * MIB, "medium", 180.0),
        (50 * MIB - 1, "medium", 180.0),
        (50 * MIB, "large", 300.0),
        (2**40, "large", 300.0),
        (None, "large", 300.0),
    ],
)
def test_default_tiers(size: int | None, tier: str, seconds: float) -> None:
    timeouts = CallTimeouts()
    assert timeouts.tier(size) == tier
    assert timeouts.for_size(size) == seconds


def test_tiers_are_configurable() -> None:
    timeouts = CallTimeouts(small_s=1, medium_s=2, large_s=3, small_below_bytes=10,
                            medium_below_bytes=20)  # fmt: skip
    assert [timeouts.for_size(n) for n in (9, 10, 19, 20, None)] == [1, 2, 2, 3, 3]


def test_bad_timeouts_are_refused() -> None:
    with pytest.raises(ValueError, match="small_s"):
        CallTimeouts(small_s=0)
    with pytest.raises(ValueError, match="small_below_bytes"):
        CallTimeouts(small_below_bytes=100, medium_below_bytes=10)
    with pytest.raises(ValueError, match="negative"):
        CallTimeouts().for_size(-1)


def test_settings_names_configure_the_tiers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLANE_TIMEOUT_SMALL_S", "5")
    monkeypatch.setenv("DOCLANE_TIMEOUT_MEDIUM_S", "6")
    monkeypatch.setenv("DOCLANE_TIMEOUT_LARGE_S", "7")
    monkeypatch.setenv("DOCLANE_TIMEOUT_SMALL_BELOW_BYTES", "100")
    monkeypatch.setenv("DOCLANE_TIMEOUT_MEDIUM_BELOW_BYTES", "200")
    monkeypatch.setenv("DOCLANE_MCP_REQUEST_TIMEOUT_S", "8")
    timeouts = CallTimeouts.from_settings(read_settings().mcp)
    assert timeouts == CallTimeouts(small_s=5, medium_s=6, large_s=7, small_below_bytes=100,
                                    medium_below_bytes=200, request_s=8)  # fmt: skip


def test_calls_get_the_timeout_of_their_size(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client(timeouts=CallTimeouts(small_s=11, medium_s=22, large_s=33, request_s=4))
    client.initialize()
    client.call_tool("plain", {}, size_bytes=1)
    client.call_tool("plain", {}, size_bytes=20 * MIB)
    client.call_tool("plain", {})
    client.call_tool("plain", {}, size_bytes=1, timeout=0.5)
    client.ping()
    assert [p.timeout for p in server.sent("tools/call")] == [11, 22, 33, 0.5]
    assert [p.timeout for p in server.sent("tools/list")] == [4]
    assert server.sent("ping")[0].timeout == 4


@pytest.mark.parametrize(
    ("given", "endpoint"),
    [
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765/mcp"),
        ("http://docling:8765/", "http://docling:8765/mcp"),
        ("https://docling.example/api/mcp", "https://docling.example/api/mcp"),
        ("http://127.0.0.1:8765/mcp", "http://127.0.0.1:8765/mcp"),
    ],
)
def test_origin_or_endpoint(given: str, endpoint: str) -> None:
    assert normalize_endpoint(given) == endpoint


def test_several_origins_make_a_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", "http://a:1, http://b:2/custom ,")
    settings = read_settings().mcp
    assert settings.endpoints == ["http://a:1/mcp", "http://b:2/custom"]
    assert settings.endpoint == "http://a:1/mcp"


@pytest.mark.parametrize("bad", ["", "ftp://x", "not a url", "http://"])
def test_bad_origins_are_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", bad)
    with pytest.raises(InvalidSetting, match="DOCLING_MCP_ORIGIN"):
        _ = read_settings().mcp


def test_defaults() -> None:
    settings = McpSettings()
    assert settings.endpoint == "http://127.0.0.1:8765/mcp"
    assert settings.protocol_version == "auto"
    assert settings.registry_ttl_s == 300 and settings.auth == "none"


def test_origin_is_the_breaker_key() -> None:
    assert origin_of("http://127.0.0.1:8765/mcp") == "http://127.0.0.1:8765"
    assert origin_of("https://docling.example/mcp") == "https://docling.example"
    assert origin_of("http://[::1]:9/mcp") == "http://[::1]:9"


def test_client_uses_its_endpoint_exactly_as_given(server: ScriptedServer) -> None:
    client = McpClient("http://localhost:4321", settings=McpSettings(), transport=server)
    assert client.endpoint == "http://localhost:4321"
    assert client.origin == "http://localhost:4321"


def test_redacted_urls_drop_user_info() -> None:
    assert mask_address("http://user:pw@host:1/mcp?key=secret") == "http://host:1/mcp"
