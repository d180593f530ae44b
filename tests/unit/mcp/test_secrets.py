"""Auth settings, and the secret never showing in reprs, settings dumps, errors or trails."""

from __future__ import annotations

import httpx
import pytest

from errors import InvalidSetting
from pipeline.mcp.auth import ApiKeyAuth, BearerAuth, auth_from_settings
from pipeline.mcp.client import McpClient
from pipeline.settings.tree import read_settings
from tests.support.scripted_mcp import ScriptedServer

TOKEN = "tok-5f8e2c-very-secret"


def test_bearer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "bearer")
    monkeypatch.setenv("DOCLING_MCP_TOKEN", TOKEN)
    settings = read_settings().mcp
    auth = auth_from_settings(settings)
    assert isinstance(auth, BearerAuth)
    request = next(auth.auth_flow(httpx.Request("POST", "http://x/mcp")))
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    for text in (repr(settings), str(settings), repr(auth), settings.model_dump_json()):
        assert TOKEN not in text


def test_api_key_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "api-key")
    monkeypatch.setenv("DOCLING_MCP_API_KEY", TOKEN)
    monkeypatch.setenv("DOCLING_MCP_TOKEN", "not-the-key")
    monkeypatch.setenv("DOCLING_MCP_API_KEY_HEADER", "X-Docling-Key")
    settings = read_settings().mcp
    auth = auth_from_settings(settings)
    assert isinstance(auth, ApiKeyAuth)
    request = next(auth.auth_flow(httpx.Request("POST", "http://x/mcp")))
    assert request.headers["X-Docling-Key"] == TOKEN
    assert "Authorization" not in request.headers
    for text in (repr(settings), str(settings), repr(auth), settings.model_dump_json()):
        assert TOKEN not in text


def test_api_key_falls_back_to_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "api-key")
    monkeypatch.setenv("DOCLING_MCP_TOKEN", TOKEN)
    auth = auth_from_settings(read_settings().mcp)
    assert isinstance(auth, ApiKeyAuth)
    request = next(auth.auth_flow(httpx.Request("POST", "http://x/mcp")))
    assert request.headers["X-API-Key"] == TOKEN


def test_no_auth_by_default() -> None:
    assert auth_from_settings(read_settings().mcp) is None


@pytest.mark.parametrize(
    ("kind", "needed"), [("bearer", "DOCLING_MCP_TOKEN"), ("api-key", "DOCLING_MCP_API_KEY")]
)
def test_auth_without_a_secret_is_refused(
    monkeypatch: pytest.MonkeyPatch, kind: str, needed: str
) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", kind)
    monkeypatch.setenv("DOCLING_MCP_API_KEY", "")
    with pytest.raises(InvalidSetting, match=needed):
        _ = read_settings().mcp


def test_unknown_auth_kind_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "basic")
    with pytest.raises(InvalidSetting, match="DOCLING_MCP_AUTH"):
        _ = read_settings().mcp


def test_the_client_shows_no_secret(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer
) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "bearer")
    monkeypatch.setenv("DOCLING_MCP_TOKEN", TOKEN)
    settings = read_settings().mcp
    client = McpClient("http://user:pw@127.0.0.1:1/mcp", settings=settings, transport=server)
    client.initialize()
    client.close()
    shown = [repr(client), client.trail_text(), repr(client.settings)]
    shown += [str(step.to_dict()) for step in client.trail]
    for text in shown:
        assert TOKEN not in text
        assert "pw@" not in text
