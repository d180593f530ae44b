"""OAuth 2.1 client credentials against a real authorization server and the fake MCP server.

The authorization server (tests/fakes/auth_server.py) issues opaque tokens for registered
clients (a secret, or a public key for private_key_jwt); the fake MCP server, with
``require_auth={"oauth": issuer}``, asks it about every bearer token (introspection), answers
401 with ``resource_metadata`` without one, and serves its protected resource metadata. The
client is configured with nothing but its identity: everything else is discovered.

Counts come from the servers: the authorization server's ``token_requests`` and the MCP
server's ``auth_rejections`` (401s it sent). Time is the token source's injected clock where
expiry matters, so nothing here waits for a token to age.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import SecretStr

from errors import PipelineError
from pipeline.mcp._oauth_keys import signing_key_from_pem
from pipeline.mcp.client import McpClient
from pipeline.mcp.oauth import (
    ClientCredentials,
    OAuthClientCredentials,
    TokenSource,
    forget_tokens,
)
from pipeline.mcp.settings import McpSettings
from tests.fixtures.auth_server import AuthServer
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.support.mcp_clients import CONVERT, REPO_ROOT

CLIENT = "doclane-worker"
SECRET = "s3cret-VALUE-that-must-never-show"


class Clock:
    """The token source's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _fresh_tokens() -> Iterator[None]:
    forget_tokens()
    yield
    forget_tokens()


@pytest.fixture
def protected(fake_server: FakeServer, auth_server: AuthServer) -> FakeServer:
    """The fake MCP server, refusing every request without a token of ``auth_server``."""
    auth_server.register(CLIENT, secret=SECRET)
    fake_server.configure(require_auth={"oauth": auth_server.issuer})
    return fake_server


def oauth_settings(settings: McpSettings, **fields: Any) -> McpSettings:
    """``settings`` with OAuth, validated again (as loading them from the environment would)."""
    merged = {**settings.model_dump(), "auth": "oauth-client-credentials", "client_id": CLIENT}
    return McpSettings.model_validate({**merged, **fields})


def source(endpoint: str, clock: Clock | None = None, **options: Any) -> TokenSource:
    credentials = ClientCredentials(CLIENT, secret=SecretStr(SECRET))
    return TokenSource(endpoint, credentials, clock=clock or Clock(), **options)


def oauth_client(
    server: FakeServer, settings: McpSettings, tokens: TokenSource | None = None
) -> McpClient:
    """A client of ``server`` whose token comes from ``tokens`` (default: a fresh source)."""
    auth = OAuthClientCredentials(tokens or source(server.url))
    return McpClient(server.url, settings=settings, auth=auth)


def counts(auth_server: AuthServer, server: FakeServer) -> tuple[int, int]:
    """(token requests the authorization server saw, 401s the MCP server sent)."""
    return auth_server.stats()["token_requests"], server.stats()["auth_rejections"]


def initialize_error(server: FakeServer, settings: McpSettings) -> PipelineError:
    with oauth_client(server, settings) as client, pytest.raises(PipelineError) as caught:
        client.initialize()
    return caught.value


def convert(client: McpClient, docx: str) -> None:
    client.initialize()  # idempotent: the first call's handshake
    assert not client.call_tool(CONVERT, {"source": docx}).is_error


def test_client_secret_basic_from_settings_gets_a_token_and_calls(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    configured = oauth_settings(settings, client_secret=SecretStr(SECRET))
    with McpClient(protected.url, settings=configured) as client:
        convert(client, docx)
    assert counts(auth_server, protected) == (1, 1)  # the first request went without a token
    # the resource exactly as its metadata published it (RFC 8707), the scope it lists
    assert auth_server.stats()["last_request"] == {
        "scope": "docling.convert",
        "resource": protected.url,
    }


def test_the_stateless_revision_carries_the_token_too(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    """``auto`` against a 2026-07-28 server: server/discover is the request that gets the 401."""
    protected.configure(stateless=True)
    configured = oauth_settings(
        settings, client_secret=SecretStr(SECRET), protocol_version="auto", scope="custom.scope"
    )
    with McpClient(protected.url, settings=configured) as client:
        convert(client, docx)
        assert client.negotiated_version == "2026-07-28"
    assert counts(auth_server, protected) == (1, 1)
    assert auth_server.stats()["last_request"]["scope"] == "custom.scope"


def test_private_key_jwt_gets_a_token_and_calls(
    protected: FakeServer,
    auth_server: AuthServer,
    settings: McpSettings,
    tmp_path: Path,
    docx: str,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    key_file = tmp_path / "client.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    auth_server.register("jwt-client", public_key_pem=public.decode())
    configured = oauth_settings(settings, client_id="jwt-client", client_key_file=key_file)
    with McpClient(protected.url, settings=configured) as client:
        convert(client, docx)
    stats = auth_server.stats()
    assert stats["token_requests"] == 1 and stats["refused"] == 0


def test_a_wrong_key_is_refused_as_E313(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, tmp_path: Path
) -> None:
    registered = ec.generate_private_key(ec.SECP256R1()).public_key()
    auth_server.register(
        "jwt-client",
        public_key_pem=registered.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode(),
    )
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    credentials = ClientCredentials("jwt-client", key=signing_key_from_pem(other))
    auth = OAuthClientCredentials(TokenSource(protected.url, credentials))
    with (
        McpClient(protected.url, settings=settings, auth=auth) as client,
        pytest.raises(PipelineError) as caught,
    ):
        client.initialize()
    assert caught.value.code == "E313" and "invalid_client" in caught.value.message
    assert auth_server.stats()["refused"] == 1


def test_the_token_is_cached_one_request_for_many_calls(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    tokens = source(protected.url)
    with oauth_client(protected, settings, tokens) as client:
        for _ in range(5):
            convert(client, docx)
    # a second client of the same source (another client in the same process)
    with oauth_client(protected, settings, tokens) as client:
        convert(client, docx)
    assert counts(auth_server, protected) == (1, 1)


def test_an_expiring_token_is_renewed_before_the_request(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    auth_server.configure(expires_in=600)
    clock = Clock()
    tokens = source(protected.url, clock)
    with oauth_client(protected, settings, tokens) as client:
        convert(client, docx)
        clock.now += 600 - 61  # just before the refresh margin (60 s): still the same token
        convert(client, docx)
        assert auth_server.stats()["token_requests"] == 1
        clock.now += 2  # inside the margin: renewed before sending, no 401 needed
        convert(client, docx)
    assert counts(auth_server, protected) == (2, 1)


def test_a_revoked_token_is_renewed_once_and_the_call_succeeds(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    with oauth_client(protected, settings) as client:
        convert(client, docx)
        assert auth_server.revoke() == 1
        convert(client, docx)
    assert counts(auth_server, protected) == (2, 2)


def test_a_token_the_server_keeps_refusing_is_E310_after_one_renewal(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    with oauth_client(protected, settings) as client:
        convert(client, docx)
        auth_server.revoke()
        auth_server.configure(issue_revoked=True)  # the server refuses every new token too
        with pytest.raises(PipelineError) as caught:
            client.call_tool(CONVERT, {"source": docx})
        assert caught.value.code == "E310"
        assert auth_server.stats()["token_requests"] == 2  # one renewal, not a loop


def test_concurrent_threads_on_a_cold_cache_share_one_token_request(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings, docx: str
) -> None:
    """Every thread needs the token before the one token request may finish: the worst case,
    forced by holding that request at the authorization server until all threads are waiting
    in the token source (after their 401, or before sending once discovery is known)."""
    threads = 6
    auth_server.configure(hold_tokens=True)
    tokens = source(protected.url, timeout_s=60)
    clients = [oauth_client(protected, settings, tokens) for _ in range(threads)]
    failures: list[BaseException] = []

    def work(client: McpClient) -> None:
        try:
            convert(client, docx)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    running = [threading.Thread(target=work, args=(c,)) for c in clients]
    for thread in running:
        thread.start()
    try:
        wait_for(
            lambda: tokens.renewing == threads and auth_server.stats()["held"] == 1,
            timeout=30,
            message="every thread needing a token while the one token request is held",
        )
    finally:
        auth_server.release()
        for thread in running:
            thread.join(timeout=60)
        for client in clients:
            client.close()
    assert not failures, failures
    assert auth_server.stats()["token_requests"] == 1
    assert 1 <= protected.stats()["auth_rejections"] <= threads


def test_a_wrong_secret_is_E313_and_never_shows(
    protected: FakeServer,
    auth_server: AuthServer,
    settings: McpSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + SECRET
    configured = oauth_settings(settings, client_secret=SecretStr(wrong))
    with McpClient(protected.url, settings=configured) as client:
        with pytest.raises(PipelineError) as caught:
            client.initialize()
        shown = [caplog.text, str(caught.value), repr(caught.value.to_dict()), repr(client),
                 repr(configured), client.trail_text()]  # fmt: skip
    error = caught.value
    assert error.code == "E313" and not error.retryable
    assert CLIENT in error.message and "invalid_client" in error.message
    for text in shown:
        assert wrong not in text and SECRET not in text


def test_secrets_and_tokens_never_appear_in_logs_reprs_or_errors(
    protected: FakeServer,
    auth_server: AuthServer,
    settings: McpSettings,
    caplog: pytest.LogCaptureFixture,
    docx: str,
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    configured = oauth_settings(settings, client_secret=SecretStr(SECRET))
    with McpClient(protected.url, settings=configured) as client:
        convert(client, docx)
        auth_server.revoke()
        convert(client, docx)  # a 401 and a renewal, logged
        auth_server.revoke()
        auth_server.configure(issue_revoked=True)  # E310 after one more renewal
        with pytest.raises(PipelineError) as caught:
            client.call_tool(CONVERT, {"source": docx})
        shown = [caplog.text, str(caught.value), repr(caught.value.to_dict()), repr(client),
                 repr(client._transport._auth), repr(configured), client.trail_text()]  # fmt: skip
    issued = auth_server.stats()["tokens"]
    assert len(issued) >= 3  # first, after the revocation, the refused renewal (+ at close)
    for text in shown:
        for secret in (SECRET, *issued):
            assert secret not in text


@pytest.mark.parametrize(
    ("advertise", "expect"),
    [("none", "publishes no protected resource metadata"), ("well-known", None)],
)
def test_discovery_without_resource_metadata_in_the_401(
    protected: FakeServer,
    auth_server: AuthServer,
    settings: McpSettings,
    docx: str,
    advertise: str,
    expect: str | None,
) -> None:
    """No resource_metadata in the 401: the well-known location (RFC 9728 3.1) is tried; with
    nothing there either, E313 says so."""
    protected.configure(require_auth={"oauth": auth_server.issuer, "advertise": advertise})
    if expect is None:
        with oauth_client(protected, settings) as client:
            convert(client, docx)
        return
    error = initialize_error(protected, settings)
    assert error.code == "E313"
    assert expect in error.message and "named no resource_metadata" in error.message
    assert auth_server.stats()["token_requests"] == 0


def test_authorization_server_metadata_404_is_E313(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings
) -> None:
    auth_server.configure(metadata_missing=True)
    error = initialize_error(protected, settings)
    assert error.code == "E313"
    assert f"the authorization server {auth_server.issuer} publishes no metadata" in str(error)
    assert auth_server.stats()["token_requests"] == 0


def test_an_unreachable_authorization_server_is_E314_retryable(
    protected: FakeServer, settings: McpSettings
) -> None:
    protected.configure(require_auth={"oauth": "http://127.0.0.1:9"})
    error = initialize_error(protected, settings)
    assert error.code == "E314" and error.retryable and not error.trips_breaker


def test_doclane_mcp_ping_with_oauth_from_the_environment(
    protected: FakeServer, auth_server: AuthServer
) -> None:
    """``doclane mcp ping`` as an operator runs it: the same client, configured by variables."""
    environment = {
        **os.environ,
        "DOCLING_MCP_AUTH": "oauth-client-credentials",
        "DOCLING_MCP_CLIENT_ID": CLIENT,
        "DOCLING_MCP_CLIENT_SECRET": SECRET,
    }
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("doclane")), "mcp", "ping",
         "--origin", protected.url, "--json", "--trail"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False, env=environment,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.splitlines()[0])["ok"] is True
    assert auth_server.stats()["token_requests"] == 1
    for secret in (SECRET, *auth_server.stats()["tokens"]):
        assert secret not in proc.stdout + proc.stderr


def test_a_token_request_left_unanswered_is_E314_at_the_oauth_bound(
    protected: FakeServer, auth_server: AuthServer, settings: McpSettings
) -> None:
    """The token fetch has its own bound (DOCLANE_MCP_OAUTH_TIMEOUT_S), not the call's: the
    authorization server holds the request until released, so only that bound can end it."""
    auth_server.configure(hold_tokens=True)
    tokens = source(protected.url, timeout_s=1.0)
    try:
        with (
            oauth_client(protected, settings, tokens) as client,
            pytest.raises(PipelineError) as caught,
        ):
            client.initialize()
    finally:
        auth_server.release()
    assert caught.value.code == "E314" and "token request" in caught.value.message
    assert "timed out" in caught.value.message
