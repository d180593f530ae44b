"""Auth settings, and the secret never showing in reprs, settings dumps, errors or trails."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from pipeline.mcp import ApiKeyAuth, BearerAuth, McpClient, auth_from_settings, load_mcp_settings
from tests.unit.mcp.scripted import ScriptedServer

TOKEN = "tok-5f8e2c-very-secret"


def test_bearer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "bearer")
    monkeypatch.setenv("DOCLING_MCP_TOKEN", TOKEN)
    settings = load_mcp_settings()
    auth = auth_from_settings(settings)
    assert isinstance(auth, BearerAuth)
    request = next(auth.auth_flow(httpx.Request("POST", "http://x/mcp")))
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    for text in (repr(settings), str(settings), repr(auth), settings.model_dump_json()):
        assert TOKEN not in text


def test_api_key_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "api-key")
    monkeypatch.setenv("DOCLING_MCP_TOKEN", TOKEN)
    monkeypatch.setenv("DOCLING_MCP_API_KEY_HEADER", "X-Docling-Key")
    auth = auth_from_settings(load_mcp_settings())
    assert isinstance(auth, ApiKeyAuth)
    request = next(auth.auth_flow(httpx.Request("POST", "http://x/mcp")))
    assert request.headers["X-Docling-Key"] == TOKEN
    assert TOKEN not in repr(auth)


def test_no_auth_by_default() -> None:
    assert auth_from_settings(load_mcp_settings()) is None


@pytest.mark.parametrize("kind", ["bearer", "api-key"])
def test_auth_without_a_token_is_refused(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", kind)
    with pytest.raises(ValidationError, match="DOCLING_MCP_TOKEN"):
        load_mcp_settings()


def test_unknown_auth_kind_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "basic")
    with pytest.raises(ValidationError):
        load_mcp_settings()


def test_the_client_shows_no_secret(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer
) -> None:
    monkeypatch.setenv("DOCLING_MCP_AUTH", "bearer")
    monkeypatch.setenv("DOCLING_MCP_TOKEN", TOKEN)
    settings = load_mcp_settings()
    client = McpClient("http://user:pw@127.0.0.1:1/mcp", settings=settings, transport=server)
    client.initialize()
    client.close()
    shown = [repr(client), client.trail_text(), repr(client.settings)]
    shown += [str(step.to_dict()) for step in client.trail]
    for text in shown:
        assert TOKEN not in text
        assert "pw@" not in text
