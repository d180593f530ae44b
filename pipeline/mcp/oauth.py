"""OAuth 2.1 client credentials (machine to machine) as an ``httpx.Auth`` for the MCP transport.

``DOCLING_MCP_AUTH=oauth-client-credentials``: the client authenticates itself to the
authorization server with a secret (``client_secret_basic``) or a signed assertion
(``private_key_jwt``, RFC 7523; audience the issuer, as SEP-1046 and RFC 7523bis say) and
gets a bearer token for the MCP server. Where that server is, is discovered
(:mod:`pipeline.mcp._oauth_discovery`) from the first 401, so nothing but the client's own
identity is configured.

Why it is shaped this way:

* One :class:`TokenSource` per process and configuration (:func:`shared_token_source`): every
  client and thread of a worker process uses the same cached token, and at most one fetch runs
  at a time (a lock; a thread that waited finds the token the other fetched and uses it).
* The token is kept until shortly before ``expires_in`` says it ends, then fetched again before
  the request goes out; a 401 for a token that looked valid (revoked, rotated keys) fetches one
  new token and retries the request once. A second 401 is E310.
* The token fetch has its own bound (``DOCLANE_MCP_OAUTH_TIMEOUT_S``) for discovery plus the
  token request, independent of the MCP request's watchdog deadline.
* The request encoding, client authentication and the JWT assertion are authlib's (with
  joserfc keys); nothing cryptographic is written here.
* The secret, the key and tokens live in ``SecretStr`` and are unwrapped only where a header or
  body is built. Reprs show ``**********``; error texts from the authorization server are
  masked of the secret before they are kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from pydantic import SecretStr

from errors import AuthorizationFailed, AuthorizationUnavailable
from pipeline import __version__
from pipeline.mcp._oauth_discovery import Challenge, Discovery, discover, parse_challenge, send
from pipeline.mcp._oauth_keys import SigningKey, load_signing_key
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.timeouts import Deadline
from pipeline.support.secrets import SECRET_SHOWN, mask_address, mask_known

logger = logging.getLogger("doclane.mcp.oauth")

#: A token is fetched again this long before it expires (or at half its life, if shorter).
REFRESH_MARGIN_S = 60.0
_FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """The client's identity: a secret (client_secret_basic) or a signing key (private_key_jwt)."""

    client_id: str
    secret: SecretStr | None = None
    key: SigningKey | None = None

    def __repr__(self) -> str:
        how = "private_key_jwt" if self.key is not None else "client_secret_basic"
        return f"ClientCredentials({self.client_id!r}, {how}, secret='**********')"

    def client_auth(self, discovery: Discovery) -> ClientAuth:
        """authlib's client authentication for this token endpoint, checked against its metadata."""
        server = discovery.server
        if self.key is not None:
            _require(server.auth_methods, "private_key_jwt", server.issuer)
            if server.signing_algs and self.key.alg not in server.signing_algs:
                raise AuthorizationFailed(
                    f"the authorization server {server.issuer} accepts assertions signed with "
                    f"{', '.join(server.signing_algs)}; DOCLING_MCP_CLIENT_KEY_FILE is a "
                    f"{self.key.alg} key"
                )
            # authlib names the assertion's audience "token_endpoint"; the issuer is what
            # RFC 7523bis and SEP-1046 require there (and what every AS accepts).
            method: Any = PrivateKeyJWT(server.issuer, alg=self.key.alg)
            return ClientAuth(self.client_id, self.key.jwk(), method)
        secret = self.secret.get_secret_value() if self.secret is not None else ""
        if "client_secret_basic" in server.auth_methods:
            return ClientAuth(self.client_id, secret, "client_secret_basic")
        _require(server.auth_methods, "client_secret_post", server.issuer)
        return ClientAuth(self.client_id, secret, "client_secret_post")


@dataclass(frozen=True, slots=True)
class Token:
    """One access token and the monotonic time after which it is fetched again (None: on 401)."""

    value: SecretStr
    refresh_at: float | None

    def __repr__(self) -> str:
        return f"Token('**********', refresh_at={self.refresh_at})"


class TokenSource:
    """The cached token of one MCP endpoint and client, fetched single-flight (module docstring)."""

    def __init__(
        self,
        endpoint: str,
        credentials: ClientCredentials,
        *,
        scope: str | None = None,
        timeout_s: float = 10.0,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.scope = scope
        self.timeout_s = timeout_s
        self._clock = clock
        self._owns_http = http is None
        self._http = http or _new_http()
        self._lock = threading.Lock()
        self._token: Token | None = None
        self._discovery: Discovery | None = None
        #: The scope the last 401 asked for: kept for renewals that need no 401.
        self._challenged_scope: str | None = None
        #: How many token requests this source sent, and how many threads are in
        #: :meth:`renew` right now (waiting for, or doing, a fetch): a test's and a debugger's aid.
        self.fetches = 0
        self.renewing = 0
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TokenSource({mask_address(self.endpoint)!r}, {self.credentials!r})"

    def current(self) -> Token | None:
        """The cached token while it is fresh; None before the first 401 or once it is due."""
        token = self._token
        if token is None or (token.refresh_at is not None and self._clock() >= token.refresh_at):
            return None
        return token

    @property
    def discovered(self) -> bool:
        return self._discovery is not None

    def renew(self, stale: Token | None, challenge: Challenge | None = None) -> Token:
        """A fresh token instead of ``stale`` (None: there was none), fetching at most once.

        Threads that arrive while another fetches wait for it and take its token, unless
        that token is itself what they hold as stale.
        """
        with self._count_lock:
            self.renewing += 1
        try:
            return self._renew(stale, challenge)
        finally:
            with self._count_lock:
                self.renewing -= 1

    def _renew(self, stale: Token | None, challenge: Challenge | None) -> Token:
        with self._lock:
            if challenge is not None and challenge.scope:
                self._challenged_scope = challenge.scope
            token = self._token
            if token is not None and token is not stale and self.current() is token:
                return token
            deadline = Deadline(self.timeout_s)  # discovery and the token request together
            if self._discovery is None or (
                challenge is not None
                and challenge.resource_metadata
                and challenge.resource_metadata != self._discovery.metadata_url
            ):
                self._discovery = discover(
                    self._http, self.endpoint, challenge or Challenge(), deadline
                )
            self._token = self._fetch(self._discovery, deadline)
            return self._token

    def forget(self) -> None:
        """Drop the token and what discovery found (after a fork, or for a test)."""
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self.renewing = 0
        self._token = None
        self._discovery = None
        if self._owns_http:  # a forked child must not share the parent's connections
            self._http = _new_http()

    def close(self) -> None:
        self._http.close()

    def _fetch(self, discovery: Discovery, deadline: Deadline) -> Token:
        server = discovery.server
        # The MCP spec's scope selection: configured, else the 401's, else all the resource
        # metadata lists, else none.
        scope = self.scope or self._challenged_scope or " ".join(discovery.scopes_supported)
        body = prepare_token_request(
            "client_credentials", **({"scope": scope} if scope else {}), resource=discovery.resource
        )
        headers = {"Content-Type": _FORM, "Accept": "application/json"}
        url, headers, body = self.credentials.client_auth(discovery).prepare(
            "POST", server.token_endpoint, headers, body
        )
        shown = mask_address(server.token_endpoint)
        self.fetches += 1
        started = self._clock()
        response = send(
            self._http, "POST", url, "token request", deadline,
            content=body.encode(), headers=headers,
        )  # fmt: skip
        token = self._read_token(response, shown, started)
        logger.info(
            "got an access token for %s from %s (client %s, renewed %s)",
            mask_address(self.endpoint),
            shown,
            self.credentials.client_id,
            "on a 401" if token.refresh_at is None else f"in {token.refresh_at - started:.0f}s",
        )
        return token

    def _read_token(self, response: httpx.Response, shown: str, started: float) -> Token:
        status = response.status_code
        try:
            document = response.json()
        except ValueError:
            document = None
        if status == 429 or status >= 500:  # send() raised already; kept for _read_token alone
            raise AuthorizationUnavailable(f"token request to {shown}: HTTP {status}")
        if status != 200 or not isinstance(document, dict):
            error = document.get("error") if isinstance(document, dict) else None
            described = document.get("error_description") if isinstance(document, dict) else None
            said = f"{error}: {described}" if described else str(error or "no OAuth error")
            secret = self.credentials.secret
            raise AuthorizationFailed(
                mask_known(  # should the authorization server echo the client secret
                    f"the authorization server refused client {self.credentials.client_id!r} "
                    f"(token request to {shown}: HTTP {status}, {said[:300]})",
                    {secret.get_secret_value(): SECRET_SHOWN} if secret is not None else {},
                ),
                http_status=status,
                detail={"oauth_error": error} if error else None,
            )
        access = document.get("access_token")
        kind = str(document.get("token_type", "")).lower()
        if not isinstance(access, str) or not access or kind != "bearer":
            raise AuthorizationFailed(
                f"the token response from {shown} has no bearer access_token "
                f"(token_type {document.get('token_type')!r})"
            )
        lifetime = document.get("expires_in")
        refresh_at = None
        if isinstance(lifetime, (int, float)) and lifetime > 0:
            refresh_at = started + lifetime - min(REFRESH_MARGIN_S, lifetime / 2)
        return Token(SecretStr(access), refresh_at)


class OAuthClientCredentials(httpx.Auth):
    """``Authorization: Bearer <token>`` from a :class:`TokenSource`; a 401 renews it once."""

    def __init__(self, source: TokenSource) -> None:
        self.source = source

    def __repr__(self) -> str:
        return f"OAuthClientCredentials({self.source!r})"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self.source.current()
        if token is None and self.source.discovered:  # due: renew before sending
            token = self.source.renew(None)
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token.value.get_secret_value()}"
        response = yield request
        if response.status_code != 401:
            return
        challenge = parse_challenge(response.headers.get_list("www-authenticate"))
        token = self.source.renew(token, challenge)
        request.headers["Authorization"] = f"Bearer {token.value.get_secret_value()}"
        yield request


def _new_http() -> httpx.Client:
    return httpx.Client(headers={"User-Agent": f"doclane/{__version__}"}, follow_redirects=False)


def _require(methods: tuple[str, ...], method: str, issuer: str) -> None:
    if method not in methods:
        raise AuthorizationFailed(
            f"the authorization server {issuer} does not accept {method} "
            f"(it takes {', '.join(methods) or 'nothing'})"
        )


# --- one source per process and configuration ---------------------------------------------------

_sources: dict[tuple[str, ...], TokenSource] = {}
_sources_lock = threading.Lock()


def shared_token_source(settings: McpSettings, endpoint: str) -> TokenSource:
    """The process's token source for ``endpoint`` and the configured client."""
    secret = settings.client_secret.get_secret_value() if settings.client_secret else ""
    key_file = str(settings.client_key_file or "")
    fingerprint = hashlib.sha256(f"{secret}\0{key_file}".encode()).hexdigest()
    key = (endpoint, settings.client_id or "", settings.scope or "", fingerprint)
    with _sources_lock:
        source = _sources.get(key)
        if source is None:
            credentials = ClientCredentials(
                settings.client_id or "",
                secret=settings.client_secret if not key_file else None,
                key=load_signing_key(settings.client_key_file) if key_file else None,
            )
            source = TokenSource(
                endpoint, credentials, scope=settings.scope, timeout_s=settings.oauth_timeout_s
            )
            _sources[key] = source
        return source


def forget_tokens() -> None:
    """Every process-wide token and discovery dropped (a forked child starts clean)."""
    global _sources_lock  # noqa: PLW0603 - a fresh lock: the old one may be held by a dead thread
    _sources_lock = threading.Lock()
    for source in _sources.values():
        source.forget()


if hasattr(os, "register_at_fork"):
    # A lock held by another thread at fork time would never be released in the child.
    os.register_at_fork(after_in_child=forget_tokens)
