"""A small real OAuth 2.1 authorization server for the client-credentials tests.

``python -m tests.fakes.auth_server --port 0 --url-file F --exit-with-parent`` serves, on
``http://127.0.0.1:PORT`` (which is also its issuer):

* ``GET /.well-known/oauth-authorization-server``: RFC 8414 metadata (404 when the
  ``metadata_missing`` knob is on);
* ``POST /token``: the client_credentials grant, the client authenticated by
  ``client_secret_basic`` or ``private_key_jwt`` (the assertion verified with PyJWT against the
  client's registered public key, audience the issuer); opaque random tokens;
* ``POST /introspect``: RFC 7662, which the fake MCP server asks about every bearer token (so a
  revocation here takes effect there at once).

Control (tests only): ``POST /_control/clients`` registers ``{"client_id", "secret"}`` or
``{"client_id", "public_key_pem"}``; ``POST /_control/configure`` sets knobs (``expires_in``,
``metadata_missing``, ``hold_tokens``, ``issue_revoked``); ``POST /_control/release`` lets held
token requests go on; ``POST /_control/revoke`` revokes every issued token;
``GET /_control/stats``; ``POST /_control/reset``; ``GET /_control/health``.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import jwt
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server import _AnnouncingServer

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "EdDSA"]


@dataclass
class AuthState:
    issuer: str = ""
    clients: dict[str, dict[str, str]] = field(default_factory=dict)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    expires_in: int = 3600
    metadata_missing: bool = False
    hold_tokens: bool = False
    #: Issue tokens the introspection calls inactive: a resource server that refuses them all.
    issue_revoked: bool = False
    release: anyio.Event = field(default_factory=anyio.Event)
    token_requests: int = 0
    #: The scope and resource (RFC 8707) the last token request asked for.
    last_request: dict[str, str] = field(default_factory=dict)
    held: int = 0
    refused: int = 0
    introspections: int = 0
    seen_assertion_ids: set[str] = field(default_factory=set)

    def reset(self) -> None:
        """Start-up state (the issuer stays); held token requests are let go first."""
        self.release.set()
        self.__dict__.update(AuthState(issuer=self.issuer).__dict__)


def _refuse(state: AuthState, error: str, description: str, status: int = 401) -> JSONResponse:
    state.refused += 1
    return JSONResponse({"error": error, "error_description": description}, status)


def _authenticate(state: AuthState, request: Request, form: dict[str, str]) -> str | None:
    """The client id the request proves, or None."""
    header = request.headers.get("authorization", "")
    if header.startswith("Basic "):
        decoded = base64.b64decode(header[6:]).decode()
        client_id, _, secret = decoded.partition(":")
        client_id, secret = unquote(client_id), unquote(secret)
        known = state.clients.get(client_id, {}).get("secret")
        return client_id if known is not None and secrets.compare_digest(known, secret) else None
    if form.get("client_assertion_type") == ASSERTION_TYPE:
        assertion = form.get("client_assertion", "")
        client_id = jwt.decode(assertion, options={"verify_signature": False}).get("iss", "")
        public_key = state.clients.get(client_id, {}).get("public_key_pem")
        if public_key is None:
            return None
        try:
            claims = jwt.decode(
                assertion, public_key, algorithms=ALGORITHMS, audience=state.issuer,
                issuer=client_id, options={"require": ["exp", "iat", "jti", "sub"]},
            )  # fmt: skip
        except jwt.PyJWTError:
            return None
        if claims["sub"] != client_id or claims["jti"] in state.seen_assertion_ids:
            return None
        state.seen_assertion_ids.add(claims["jti"])
        return client_id
    return None


def build_app(state: AuthState) -> Starlette:
    async def metadata(request: Request) -> JSONResponse:
        if state.metadata_missing:
            return JSONResponse({"error": "not found"}, 404)
        return JSONResponse(
            {
                "issuer": state.issuer,
                "token_endpoint": f"{state.issuer}/token",
                "introspection_endpoint": f"{state.issuer}/introspect",
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt"],
                "token_endpoint_auth_signing_alg_values_supported": ALGORITHMS,
                "response_types_supported": [],
            }
        )

    async def token(request: Request) -> JSONResponse:
        state.token_requests += 1
        if state.hold_tokens:
            state.held += 1
            await state.release.wait()
        form = {k: str(v) for k, v in (await request.form()).items()}
        state.last_request = {k: form.get(k, "") for k in ("scope", "resource")}
        if form.get("grant_type") != "client_credentials":
            return _refuse(state, "unsupported_grant_type", "client_credentials only", 400)
        client_id = _authenticate(state, request, form)
        if client_id is None:
            return _refuse(state, "invalid_client", "client authentication failed")
        value = "at-" + secrets.token_urlsafe(24)
        state.tokens[value] = {
            "client_id": client_id,
            "scope": form.get("scope", ""),
            "resource": form.get("resource", ""),
            "exp": time.time() + state.expires_in,
            "revoked": state.issue_revoked,
        }
        return JSONResponse(
            {"access_token": value, "token_type": "Bearer", "expires_in": state.expires_in},
            headers={"Cache-Control": "no-store"},
        )

    async def introspect(request: Request) -> JSONResponse:
        state.introspections += 1
        found = state.tokens.get(str((await request.form()).get("token", "")))
        if found is None or found["revoked"] or found["exp"] <= time.time():
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, **{k: found[k] for k in ("client_id", "scope")}})

    async def register(request: Request) -> JSONResponse:
        client = await request.json()
        state.clients[client.pop("client_id")] = client
        return JSONResponse({"clients": sorted(state.clients)})

    async def configure(request: Request) -> JSONResponse:
        for name, value in (await request.json()).items():
            if name not in ("expires_in", "metadata_missing", "hold_tokens", "issue_revoked"):
                return JSONResponse({"error": f"unknown knob {name}"}, 400)
            setattr(state, name, value)
        if state.hold_tokens:
            state.release = anyio.Event()
        return JSONResponse({"ok": True})

    async def release(request: Request) -> JSONResponse:
        state.hold_tokens = False
        state.release.set()
        return JSONResponse({"ok": True})

    async def revoke(request: Request) -> JSONResponse:
        for found in state.tokens.values():
            found["revoked"] = True
        return JSONResponse({"revoked": len(state.tokens)})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "token_requests": state.token_requests,
                "last_request": state.last_request,
                "held": state.held,
                "refused": state.refused,
                "introspections": state.introspections,
                "issued": len(state.tokens),
                "tokens": sorted(state.tokens),  # so a test can look for them in its logs
            }
        )

    async def reset(request: Request) -> JSONResponse:
        state.reset()
        return JSONResponse({"ok": True})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "pid": os.getpid()})

    return Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", metadata, methods=["GET"]),
            Route("/token", token, methods=["POST"]),
            Route("/introspect", introspect, methods=["POST"]),
            Route("/_control/clients", register, methods=["POST"]),
            Route("/_control/configure", configure, methods=["POST"]),
            Route("/_control/release", release, methods=["POST"]),
            Route("/_control/revoke", revoke, methods=["POST"]),
            Route("/_control/stats", stats, methods=["GET"]),
            Route("/_control/reset", reset, methods=["POST"]),
            Route("/_control/health", health, methods=["GET"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.auth_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--url-file", type=Path)
    parser.add_argument("--exit-with-parent", action="store_true")
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    state = AuthState(issuer=f"http://{args.host}:{sock.getsockname()[1]}")
    config = uvicorn.Config(
        build_app(state), log_level="warning", timeout_graceful_shutdown=1, access_log=False
    )
    server = _AnnouncingServer(
        config,
        url=state.issuer,
        url_file=args.url_file,
        parent_pid=os.getppid() if args.exit_with_parent else None,
    )
    server.run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
