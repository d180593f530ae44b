"""The fake MCP server as an OAuth protected resource (knob ``require_auth={"oauth": issuer}``).

Every bearer token is checked with the authorization server's introspection endpoint (RFC 7662),
so a token revoked there is refused here at once. A missing or refused token gets a 401 whose
``WWW-Authenticate`` names the protected resource metadata (RFC 9728), served at
``/.well-known/oauth-protected-resource/mcp``. ``"advertise"`` in the knob bends discovery:
``header`` (default: the 401 names the metadata), ``well-known`` (the metadata is served but the
401 does not name it) or ``none`` (no metadata at all).
"""

from __future__ import annotations

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.state import FakeState

PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
SCOPES = ["docling.convert"]


def is_oauth(rule: dict[str, str] | None) -> bool:
    return rule is not None and "oauth" in rule


async def token_is_active(rule: dict[str, str], authorization: str | None) -> bool:
    """Whether the ``Authorization: Bearer`` token is one the issuer says is active."""
    if not authorization or not authorization.startswith("Bearer "):
        return False
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(
            f"{rule['oauth']}/introspect", data={"token": authorization.removeprefix("Bearer ")}
        )
    return response.status_code == 200 and response.json().get("active") is True


def challenge(rule: dict[str, str], host: str) -> str:
    """The 401's ``WWW-Authenticate`` value."""
    value = 'Bearer error="invalid_token", error_description="a valid access token is required"'
    if rule.get("advertise", "header") == "header":
        value += f', resource_metadata="http://{host}{PRM_PATH}"'
    return value


def protected_resource_route(state: FakeState) -> Route:
    async def metadata(request: Request) -> JSONResponse:
        rule = state.knobs.require_auth
        if rule is None or not is_oauth(rule) or rule.get("advertise") == "none":
            return JSONResponse({"error": "not found"}, 404)
        origin = str(request.base_url).rstrip("/")
        return JSONResponse(
            {
                "resource": f"{origin}/mcp",
                "authorization_servers": [rule["oauth"]],
                "scopes_supported": SCOPES,
                "bearer_methods_supported": ["header"],
            }
        )

    return Route(PRM_PATH, metadata, methods=["GET"])
