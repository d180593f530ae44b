"""Credentials for the Docling MCP server, as ``httpx.Auth`` objects that never show the secret.

Static ones (a bearer token, an API key) are here; OAuth client credentials, which fetch and
renew their token, are :mod:`pipeline.mcp.oauth`.

The secret lives in a ``pydantic.SecretStr`` and is unwrapped only in ``auth_flow``, at the
moment the header is set on an outgoing request; reprs, logs, errors and the lifecycle trail
see ``**********``. httpx logs request lines, not headers, so the wire is the only place the
secret appears.
"""

from __future__ import annotations

from collections.abc import Generator

import httpx
from pydantic import SecretStr

from pipeline.mcp.settings import OAUTH, McpSettings


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``."""

    def __init__(self, token: SecretStr | str) -> None:
        self._token = token if isinstance(token, SecretStr) else SecretStr(token)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
        yield request

    def __repr__(self) -> str:
        return "BearerAuth(token=SecretStr('**********'))"


class ApiKeyAuth(httpx.Auth):
    """``<header>: <key>``, e.g. ``X-API-Key``."""

    def __init__(self, key: SecretStr | str, header: str = "X-API-Key") -> None:
        self._key = key if isinstance(key, SecretStr) else SecretStr(key)
        self.header = header

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self.header] = self._key.get_secret_value()
        yield request

    def __repr__(self) -> str:
        return f"ApiKeyAuth(header={self.header!r}, key=SecretStr('**********'))"


def auth_from_settings(settings: McpSettings, endpoint: str | None = None) -> httpx.Auth | None:
    """The auth ``DOCLING_MCP_AUTH`` asks for, or None for ``none``.

    OAuth needs the endpoint (the token is for that resource): by default the settings' first.
    Its token is the process's, shared by every client of the same endpoint and client id.
    """
    if settings.auth == OAUTH:
        # Imported here: OAuth's libraries cost every process that never uses them 0.25 s.
        from pipeline.mcp.oauth import OAuthClientCredentials, shared_token_source

        return OAuthClientCredentials(shared_token_source(settings, endpoint or settings.endpoint))
    secret = settings.secret
    if settings.auth == "none" or secret is None:
        return None
    if settings.auth == "bearer":
        return BearerAuth(secret)
    return ApiKeyAuth(secret, settings.api_key_header)
