"""The pure parts of OAuth client credentials: challenges, resource matching, keys, settings,
client authentication choice and token lifetimes. The HTTP parts are in
tests/integration/mcp/test_oauth.py, against a real authorization server."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from pydantic import SecretStr, ValidationError

from errors import PipelineError
from pipeline.mcp._oauth_discovery import (
    AuthorizationServer,
    Discovery,
    _covers,
    parse_challenge,
)
from pipeline.mcp._oauth_keys import signing_key_from_pem
from pipeline.mcp.oauth import ClientCredentials, TokenSource
from pipeline.mcp.settings import McpSettings

ENDPOINT = "https://mcp.example.com/mcp"
SECRET = "unit-secret-7f3a"


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


# --- WWW-Authenticate -------------------------------------------------------------------------


def test_a_bearer_challenge_gives_its_resource_metadata_scope_and_error() -> None:
    challenge = parse_challenge(
        ['Bearer error="invalid_token", scope="a b", '
         'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"']
    )  # fmt: skip
    assert challenge.resource_metadata == (
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    )
    assert challenge.scope == "a b" and challenge.error == "invalid_token"


def test_other_schemes_and_a_following_challenge_are_ignored() -> None:
    challenge = parse_challenge(
        ['Basic realm="x"', 'Bearer resource_metadata="https://r/m", Basic realm="y"']
    )
    assert challenge.resource_metadata == "https://r/m" and challenge.scope is None
    assert parse_challenge(['Basic realm="x"']).resource_metadata is None
    assert parse_challenge([]).resource_metadata is None
    assert parse_challenge(["Bearer"]).resource_metadata is None


# --- the resource a metadata document names ---------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "covers"),
    [
        ("https://mcp.example.com/mcp", True),
        ("https://mcp.example.com", True),
        ("https://mcp.example.com/", True),
        ("https://mcp.example.com/mc", False),
        ("https://mcp.example.com/other", False),
        ("https://evil.example.com/mcp", False),
        ("http://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", False),
    ],
)
def test_metadata_must_be_for_this_endpoint(resource: str, covers: bool) -> None:
    assert _covers(resource, ENDPOINT) is covers


# --- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "alg"),
    [
        (rsa.generate_private_key(65537, 2048), "RS256"),
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
        (ec.generate_private_key(ec.SECP384R1()), "ES384"),
        (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
    ],
)
def test_the_algorithm_follows_the_key(key: rsa.RSAPrivateKey, alg: str) -> None:
    signing = signing_key_from_pem(pem(key), source="/keys/client.pem")
    assert signing.alg == alg
    assert "PRIVATE" not in repr(signing) and "/keys/client.pem" in repr(signing)
    assert signing.jwk().as_dict(private=False)["kty"] == signing.key_type


def test_a_file_that_is_no_key_is_E313_naming_the_file_only() -> None:
    with pytest.raises(PipelineError) as caught:
        signing_key_from_pem(b"not a key " + SECRET.encode(), source="/keys/bad.pem")
    assert caught.value.code == "E313" and "/keys/bad.pem" in caught.value.message
    assert SECRET not in caught.value.message


# --- settings -----------------------------------------------------------------------------------


def oauth(**fields: object) -> McpSettings:
    return McpSettings(auth="oauth-client-credentials", **fields)  # type: ignore[arg-type]


def test_oauth_needs_a_client_id_and_exactly_one_credential(tmp_path: Path) -> None:
    key_file = tmp_path / "k.pem"
    key_file.write_bytes(pem(ec.generate_private_key(ec.SECP256R1())))
    with pytest.raises(ValidationError, match="DOCLING_MCP_CLIENT_ID"):
        oauth(client_secret=SECRET)
    with pytest.raises(ValidationError, match="exactly one"):
        oauth(client_id="c")
    with pytest.raises(ValidationError, match="exactly one"):
        oauth(client_id="c", client_secret=SECRET, client_key_file=key_file)
    with pytest.raises(ValidationError, match="not a readable file"):
        oauth(client_id="c", client_key_file=tmp_path / "missing.pem")
    assert oauth(client_id="c", client_key_file=key_file).client_key_file == key_file
    configured = oauth(client_id="c", client_secret=SECRET, client_key_file="")
    assert configured.client_key_file is None
    assert SECRET not in repr(configured) and SECRET not in str(configured.model_dump())


@pytest.mark.parametrize("auth", ["bearer", "oauth-client-credentials"])
def test_auth_with_a_stdio_child_is_refused(auth: str) -> None:
    with pytest.raises(ValidationError, match="auth applies to HTTP servers only"):
        McpSettings(
            auth=auth,  # type: ignore[arg-type]
            token=SecretStr("t"),
            client_id="c",
            client_secret=SecretStr(SECRET),
            command="docling-mcp-server --transport stdio",
            origin="",
        )


# --- client authentication against what the server's metadata says ------------------------------


def discovery(**server: object) -> Discovery:
    fields: dict[str, object] = {"issuer": "https://as.example.com", "token_endpoint": "t"}
    fields.update(server)
    return Discovery(resource=ENDPOINT, server=AuthorizationServer(**fields))  # type: ignore[arg-type]


def test_a_secret_is_sent_basic_or_post_as_the_server_accepts() -> None:
    credentials = ClientCredentials("c", secret=SecretStr(SECRET))
    _, headers, body = credentials.client_auth(discovery()).prepare("POST", "t", {}, "")
    assert headers["Authorization"].startswith("Basic ") and SECRET not in body
    only_post = discovery(auth_methods=("client_secret_post",))
    _, headers, body = credentials.client_auth(only_post).prepare("POST", "t", {}, "")
    assert "Authorization" not in headers and f"client_secret={SECRET}" in body
    with pytest.raises(PipelineError, match="does not accept client_secret_post"):
        credentials.client_auth(discovery(auth_methods=("private_key_jwt",)))
    assert SECRET not in repr(credentials)
    echo = {"error": "invalid_client", "error_description": f"bad secret {SECRET}"}
    with pytest.raises(PipelineError) as echoed:  # an authorization server echoing the secret
        read(echo, status=401)
    assert "bad secret **********" in echoed.value.message and SECRET not in str(echoed.value)


def test_a_key_needs_private_key_jwt_and_an_accepted_algorithm() -> None:
    key = signing_key_from_pem(pem(ec.generate_private_key(ec.SECP256R1())))
    credentials = ClientCredentials("c", key=key)
    with pytest.raises(PipelineError, match="does not accept private_key_jwt"):
        credentials.client_auth(discovery())
    with pytest.raises(PipelineError, match="ES256 key"):
        credentials.client_auth(
            discovery(auth_methods=("private_key_jwt",), signing_algs=("RS256",))
        )
    accepted = discovery(auth_methods=("private_key_jwt",), signing_algs=("ES256",))
    _, _, body = credentials.client_auth(accepted).prepare("POST", "t", {}, "")
    assert "client_assertion=" in body and "jwt-bearer" in body


# --- token lifetimes ------------------------------------------------------------------------------


def read(document: dict[str, object], status: int = 200) -> object:
    tokens = TokenSource(ENDPOINT, ClientCredentials("c", secret=SecretStr(SECRET)))
    try:
        return tokens._read_token(httpx.Response(status, json=document), "t", started=100.0)
    finally:
        tokens.close()


def test_a_token_is_renewed_a_minute_early_or_at_half_its_life() -> None:
    long = read({"access_token": "x", "token_type": "Bearer", "expires_in": 3600})
    short = read({"access_token": "x", "token_type": "bearer", "expires_in": 30})
    forever = read({"access_token": "x", "token_type": "Bearer"})
    assert long.refresh_at == 100.0 + 3600 - 60  # type: ignore[attr-defined]
    assert short.refresh_at == 100.0 + 15  # type: ignore[attr-defined]
    assert forever.refresh_at is None  # type: ignore[attr-defined]
    assert "x" not in repr(long).replace("refresh_at", "")


@pytest.mark.parametrize(
    ("status", "document", "code"),
    [
        (
            401,
            {"error": "invalid_client", "error_description": f"secret {SECRET} is wrong"},
            "E313",
        ),
        (200, {"access_token": "x", "token_type": "DPoP"}, "E313"),
        (200, {"token_type": "Bearer"}, "E313"),
        (503, {}, "E314"),
        (429, {}, "E314"),
    ],
)
def test_token_responses_that_give_no_token(
    status: int, document: dict[str, object], code: str
) -> None:
    with pytest.raises(PipelineError) as caught:
        read(document, status)
    assert caught.value.code == code and SECRET not in str(caught.value)
