"""Where an MCP server's tokens come from: its 401 challenge, RFC 9728 and RFC 8414 metadata.

The MCP authorization spec (2025-06-18 on) makes the resource server say where to go: its 401
carries ``WWW-Authenticate: Bearer resource_metadata="<url>"``; that protected resource metadata
(RFC 9728) names the resource identifier and the authorization server(s); the authorization
server's metadata (RFC 8414, or OpenID Connect discovery) names the token endpoint and the
client authentication methods it takes. Nothing here is configured by hand, so a server that
moves its issuer needs no change in doclane.

Failures say which document was missing or wrong: a misconfiguration (404, a resource that is
not this server, an issuer that does not match) is E313 and final; an unreachable or failing
metadata host is E314 and retryable. All requests share one deadline (``oauth_timeout_s``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.request import parse_http_list, parse_keqv_list

import httpx

from errors import AuthorizationFailed, AuthorizationUnavailable
from pipeline.mcp.timeouts import Deadline
from pipeline.support.secrets import mask_address

logger = logging.getLogger("doclane.mcp.oauth")

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
AS_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"


@dataclass(frozen=True, slots=True)
class Challenge:
    """What a 401's ``WWW-Authenticate: Bearer ...`` said (RFC 6750 section 3, RFC 9728)."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class AuthorizationServer:
    """The parts of RFC 8414 metadata a client-credentials client needs."""

    issuer: str
    token_endpoint: str
    #: ``token_endpoint_auth_methods_supported``; RFC 8414's default is client_secret_basic.
    auth_methods: tuple[str, ...] = ("client_secret_basic",)
    #: ``token_endpoint_auth_signing_alg_values_supported``; empty: not said.
    signing_algs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Discovery:
    """Where to get a token for one MCP endpoint, and for which resource and scopes."""

    resource: str
    server: AuthorizationServer
    scopes_supported: tuple[str, ...] = ()
    metadata_url: str = ""


def parse_challenge(values: list[str]) -> Challenge:
    """The Bearer challenge among ``WWW-Authenticate`` header values (others are ignored)."""
    for value in values:
        scheme, _, rest = value.strip().partition(" ")
        if scheme.lower() != "bearer":
            continue
        params: list[str] = []
        for item in parse_http_list(rest):
            name = item.partition("=")[0]
            if " " in name.strip():  # the next challenge's "Scheme param=..." begins
                break
            if "=" in item:
                params.append(item.strip())
        found = {k.lower(): v for k, v in parse_keqv_list(params).items()} if params else {}
        return Challenge(found.get("resource_metadata"), found.get("scope"), found.get("error"))
    return Challenge()


def discover(
    http: httpx.Client, endpoint: str, challenge: Challenge, deadline: Deadline
) -> Discovery:
    """Protected resource metadata, then its first authorization server's metadata."""
    resource_doc, metadata_url = _protected_resource(http, endpoint, challenge, deadline)
    resource = resource_doc.get("resource")
    if not isinstance(resource, str) or not _covers(resource, endpoint):
        raise AuthorizationFailed(
            f"the protected resource metadata at {mask_address(metadata_url)} is for resource "
            f"{resource!r}, not for {mask_address(endpoint)}: refusing to ask for a token for it"
        )
    servers = resource_doc.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise AuthorizationFailed(
            f"the protected resource metadata at {mask_address(metadata_url)} names no "
            "authorization_servers"
        )
    scopes = resource_doc.get("scopes_supported")
    return Discovery(
        resource=resource,
        server=_authorization_server(http, servers[0], deadline),
        scopes_supported=tuple(s for s in scopes or () if isinstance(s, str)),
        metadata_url=metadata_url,
    )


def _protected_resource(
    http: httpx.Client, endpoint: str, challenge: Challenge, deadline: Deadline
) -> tuple[dict[str, Any], str]:
    """The RFC 9728 document the 401 names, else the well-known locations of RFC 9728 3.1."""
    url = httpx.URL(endpoint)
    if challenge.resource_metadata:
        candidates = [challenge.resource_metadata]
    else:
        root = str(url.copy_with(path=PRM_WELL_KNOWN, query=None, fragment=None))
        path = url.path.rstrip("/")
        candidates = [root + path, root] if path else [root]
    for candidate in candidates:
        document = _get_json(http, candidate, "protected resource metadata", deadline)
        if document is not None:
            return document, candidate
    where = ", ".join(mask_address(c) for c in candidates)
    said = "" if challenge.resource_metadata else " (its 401 named no resource_metadata)"
    raise AuthorizationFailed(
        f"{mask_address(endpoint)} requires a token but publishes no protected resource "
        f"metadata{said}: nothing at {where}"
    )


def _authorization_server(
    http: httpx.Client, issuer: str, deadline: Deadline
) -> AuthorizationServer:
    """RFC 8414 then OIDC discovery, in the MCP spec's order for issuers with and without path."""
    try:
        url = httpx.URL(issuer)
    except httpx.InvalidURL as exc:
        raise AuthorizationFailed(f"the authorization server {issuer!r} is not a URL") from exc
    base = url.copy_with(path="", query=None, fragment=None)
    path = url.path.rstrip("/")
    candidates = [
        f"{base}{AS_WELL_KNOWN}{path}",
        f"{base}{OIDC_WELL_KNOWN}{path}",
        *([f"{base}{path}{OIDC_WELL_KNOWN}"] if path else []),
    ]
    for candidate in candidates:
        document = _get_json(http, candidate, "authorization server metadata", deadline)
        if document is None:
            continue
        said = str(document.get("issuer", ""))
        if said.rstrip("/") != issuer.rstrip("/"):
            raise AuthorizationFailed(
                f"the authorization server metadata at {mask_address(candidate)} is for issuer "
                f"{said!r}, not {issuer!r} (RFC 8414 section 3.3)"
            )
        token_endpoint = document.get("token_endpoint")
        if not isinstance(token_endpoint, str) or not token_endpoint:
            raise AuthorizationFailed(
                f"the authorization server metadata at {mask_address(candidate)} has no "
                "token_endpoint"
            )
        methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        algs = document.get("token_endpoint_auth_signing_alg_values_supported") or []
        return AuthorizationServer(
            issuer=said,
            token_endpoint=token_endpoint,
            auth_methods=tuple(str(m) for m in methods),
            signing_algs=tuple(str(a) for a in algs),
        )
    raise AuthorizationFailed(
        f"the authorization server {issuer} publishes no metadata: nothing at "
        + ", ".join(mask_address(c) for c in candidates)
    )


def _get_json(http: httpx.Client, url: str, what: str, deadline: Deadline) -> dict[str, Any] | None:
    """The JSON object at ``url``; None for a 404 (or 410); E314 when the host fails."""
    shown = mask_address(url)
    response = send(http, "GET", url, what, deadline, headers={"Accept": "application/json"})
    if response.status_code in (404, 410):
        logger.debug("no %s at %s (HTTP %s)", what, shown, response.status_code)
        return None
    if response.status_code != 200:
        raise AuthorizationFailed(f"{what} at {shown}: HTTP {response.status_code}")
    try:
        document = response.json()
    except ValueError as exc:
        raise AuthorizationFailed(f"{what} at {shown} is not JSON") from exc
    if not isinstance(document, dict):
        raise AuthorizationFailed(f"{what} at {shown} is not a JSON object")
    return document


def send(
    http: httpx.Client, method: str, url: str, what: str, deadline: Deadline, **options: Any
) -> httpx.Response:
    """One request of discovery or the token fetch, within ``deadline``: the boundary where
    httpx's exceptions, 429 and 5xx become E314 (the authorization side failed for now)."""
    shown = mask_address(url)
    remaining = deadline.remaining()
    if remaining <= 0:
        raise AuthorizationUnavailable(f"{what}: no answer within {deadline.seconds:g}s")
    try:
        response = http.request(method, url, timeout=remaining, **options)
    except httpx.TimeoutException as exc:
        raise AuthorizationUnavailable(f"{what} at {shown}: timed out") from exc
    except httpx.HTTPError as exc:
        raise AuthorizationUnavailable(
            f"{what} at {shown}: cannot reach it: {type(exc).__name__}"
        ) from exc
    if response.status_code == 429 or response.status_code >= 500:
        raise AuthorizationUnavailable(f"{what} at {shown}: HTTP {response.status_code}")
    return response


def _covers(resource: str, endpoint: str) -> bool:
    """RFC 9728 3.3 / MCP: the metadata's resource is this endpoint or a path prefix of it."""
    try:
        want, got = httpx.URL(endpoint), httpx.URL(resource)
    except httpx.InvalidURL:
        return False
    if (want.scheme, want.host, want.port) != (got.scheme, got.host, got.port):
        return False
    prefix = got.path.rstrip("/")
    return want.path == prefix or want.path.startswith(prefix + "/") or not prefix
