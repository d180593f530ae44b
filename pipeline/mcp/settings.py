"""Settings of the MCP client (the ``mcp`` section of ``pipeline.settings``).

Environment variables (all optional):

=====================================  =============================  ===========================
variable                               default                        meaning
=====================================  =============================  ===========================
``DOCLING_MCP_ORIGIN``                 ``http://127.0.0.1:8765``      origin or endpoint URL; a
                                                                      comma-separated list names
                                                                      a pool; ``/mcp`` is added
                                                                      to a URL without a path
``DOCLING_MCP_COMMAND``                (none)                         a server command line:
                                                                      each process runs it as a
                                                                      stdio child (instead of an
                                                                      origin; not both)
``MCP_PROTOCOL_VERSION``               ``auto``                       ``auto``: 2026-07-28 where
                                                                      the server offers it (probe
                                                                      ``server/discover``), else
                                                                      the 2025-11-25 handshake; or
                                                                      one version, pinned
``DOCLING_MCP_AUTH``                   ``none``                       ``none|bearer|api-key|``
                                                                      ``oauth-client-credentials``
``DOCLING_MCP_TOKEN``                  (none)                         the bearer token
``DOCLING_MCP_API_KEY``                (none)                         the key of ``api-key`` auth
                                                                      (falls back to the token)
``DOCLING_MCP_API_KEY_HEADER``         ``X-API-Key``                  header of ``api-key`` auth
``DOCLING_MCP_CLIENT_ID``              (none)                         OAuth client id
``DOCLING_MCP_CLIENT_SECRET``          (none)                         OAuth client secret
                                                                      (``client_secret_basic``)
``DOCLING_MCP_CLIENT_KEY_FILE``        (none)                         PEM private key
                                                                      (``private_key_jwt``)
``DOCLING_MCP_SCOPE``                  (none)                         OAuth scope to ask for
``DOCLANE_MCP_OAUTH_TIMEOUT_S``        10                             discovery + token fetch
``DOCLANE_TIMEOUT_SMALL_S``            60                             call timeout, small tier
``DOCLANE_TIMEOUT_MEDIUM_S``           180                            call timeout, medium tier
``DOCLANE_TIMEOUT_LARGE_S``            300                            call timeout, large/unknown
``DOCLANE_TIMEOUT_SMALL_BELOW_BYTES``  10 MiB                         small tier below this size
``DOCLANE_TIMEOUT_MEDIUM_BELOW_BYTES`` 50 MiB                         medium tier below this size
``DOCLANE_MCP_REQUEST_TIMEOUT_S``      30                             initialize, list, ping
``DOCLANE_MCP_CONNECT_TIMEOUT_S``      10                             TCP connect
``DOCLANE_MCP_REGISTRY_TTL_S``         300                            tool list cache lifetime
``DOCLANE_MCP_SSE_RETRY_MS``           1000                           resume delay when the
                                                                      server gives no ``retry``
``DOCLANE_MCP_RESUME_ATTEMPTS``        3                              GETs without progress
``DOCLANE_MCP_MAX_PARALLEL``           4                              threads of a parallel batch
``DOCLANE_MCP_MAX_CONNECTIONS``        20                             keep-alive pool size
``DOCLANE_MCP_MAX_REPLY_BYTES``        128 MiB                        largest reply read (E312)
``DOCLANE_MCP_STDIO_GRACE_S``          2                              stdio child stop: after
                                                                      stdin closes, and again
                                                                      after SIGTERM
=====================================  =============================  ===========================

The token, the API key and the OAuth client secret are ``SecretStr``: they print as
``**********`` in reprs, logs and errors. Auth applies to HTTP servers only: a stdio child
(``DOCLING_MCP_COMMAND``) is this process's own pipe, so setting both is refused.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from pipeline.mcp.endpoints import normalize_endpoint, stdio_endpoint
from pipeline.queues import MEDIUM_BELOW_BYTES, SMALL_BELOW_BYTES
from pipeline.support.settings import Section

DEFAULT_ORIGIN = "http://127.0.0.1:8765"

AuthKind = Literal["none", "bearer", "api-key", "oauth-client-credentials"]
OAUTH = "oauth-client-credentials"


def _env(name: str) -> Any:
    """A field read from exactly the environment variable ``name`` (and settable by field name)."""
    return AliasChoices(name)


class McpSettings(Section):
    """How to reach the Docling MCP server(s) and how patient to be with them."""

    # Every field names its variable; an empty one is a value (DOCLING_MCP_ORIGIN= is refused).
    model_config = SettingsConfigDict(env_ignore_empty=False)

    origin: str = Field(default=DEFAULT_ORIGIN, validation_alias=_env("DOCLING_MCP_ORIGIN"))
    command: str | None = Field(
        default=None,
        validation_alias=_env("DOCLING_MCP_COMMAND"),
        description="run the server as a child of each process and speak stdio to it",
    )
    protocol_version: str = Field(default="auto", validation_alias=_env("MCP_PROTOCOL_VERSION"))
    auth: AuthKind = Field(
        default="none",
        validation_alias=_env("DOCLING_MCP_AUTH"),
        description="how to authenticate to an HTTP server (a stdio child takes none)",
    )
    token: SecretStr | None = Field(default=None, validation_alias=_env("DOCLING_MCP_TOKEN"))
    api_key: SecretStr | None = Field(default=None, validation_alias=_env("DOCLING_MCP_API_KEY"))
    api_key_header: str = Field(
        default="X-API-Key", validation_alias=_env("DOCLING_MCP_API_KEY_HEADER")
    )
    client_id: str | None = Field(
        default=None,
        validation_alias=_env("DOCLING_MCP_CLIENT_ID"),
        description="oauth-client-credentials: the client id registered at the authorization "
        "server",
    )
    client_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("DOCLING_MCP_CLIENT_SECRET"),
        description="oauth-client-credentials: the client secret (sent as client_secret_basic)",
    )
    client_key_file: Path | None = Field(
        default=None,
        validation_alias=_env("DOCLING_MCP_CLIENT_KEY_FILE"),
        description="oauth-client-credentials: a PEM private key (RSA, EC or Ed25519) that signs "
        "a private_key_jwt assertion instead of a secret",
    )
    scope: str | None = Field(
        default=None,
        validation_alias=_env("DOCLING_MCP_SCOPE"),
        description="oauth-client-credentials: the scope to ask for (default: what the server's "
        "401 or its protected resource metadata names)",
    )
    oauth_timeout_s: float = Field(
        default=10.0,
        gt=0,
        validation_alias=_env("DOCLANE_MCP_OAUTH_TIMEOUT_S"),
        description="oauth-client-credentials: the bound on discovering the authorization server "
        "and fetching one token",
    )

    timeout_small_s: float = Field(
        default=60.0, gt=0, validation_alias=_env("DOCLANE_TIMEOUT_SMALL_S")
    )
    timeout_medium_s: float = Field(
        default=180.0, gt=0, validation_alias=_env("DOCLANE_TIMEOUT_MEDIUM_S")
    )
    timeout_large_s: float = Field(
        default=300.0, gt=0, validation_alias=_env("DOCLANE_TIMEOUT_LARGE_S")
    )
    timeout_small_below_bytes: int = Field(
        default=SMALL_BELOW_BYTES, ge=0, validation_alias=_env("DOCLANE_TIMEOUT_SMALL_BELOW_BYTES")
    )
    timeout_medium_below_bytes: int = Field(
        default=MEDIUM_BELOW_BYTES,
        ge=0,
        validation_alias=_env("DOCLANE_TIMEOUT_MEDIUM_BELOW_BYTES"),
    )
    request_timeout_s: float = Field(
        default=30.0, gt=0, validation_alias=_env("DOCLANE_MCP_REQUEST_TIMEOUT_S")
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, validation_alias=_env("DOCLANE_MCP_CONNECT_TIMEOUT_S")
    )

    registry_ttl_s: float = Field(
        default=300.0, ge=0, validation_alias=_env("DOCLANE_MCP_REGISTRY_TTL_S")
    )
    sse_retry_ms: int = Field(default=1000, ge=0, validation_alias=_env("DOCLANE_MCP_SSE_RETRY_MS"))
    resume_attempts: int = Field(
        default=3, ge=0, validation_alias=_env("DOCLANE_MCP_RESUME_ATTEMPTS")
    )
    max_parallel: int = Field(default=4, ge=1, validation_alias=_env("DOCLANE_MCP_MAX_PARALLEL"))
    max_connections: int = Field(
        default=20, ge=1, validation_alias=_env("DOCLANE_MCP_MAX_CONNECTIONS")
    )
    max_reply_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=1024,
        validation_alias=_env("DOCLANE_MCP_MAX_REPLY_BYTES"),
        description="the largest reply (and saved Docling JSON) read from a server; more is E312",
    )
    stdio_grace_s: float = Field(
        default=2.0,
        ge=0,
        validation_alias=_env("DOCLANE_MCP_STDIO_GRACE_S"),
        description="stopping a stdio child: wait this long after closing stdin, then SIGTERM, "
        "wait again, then SIGKILL",
    )

    @field_validator("origin")
    @classmethod
    def _valid_origins(cls, value: str) -> str:
        if value.strip():  # empty: no server by URL (a command must say how to start one)
            split_origins(value)  # raises ValueError with the offending entry
        return value.strip()

    @field_validator("client_id", "client_secret", "client_key_file", "scope", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """``DOCLING_MCP_CLIENT_KEY_FILE=`` (as in .env.example) means no file, not ``.``."""
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("command")
    @classmethod
    def _valid_command(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"DOCLING_MCP_COMMAND is not a command line: {exc}") from exc
        return shlex.join(argv)

    @model_validator(mode="after")
    def _one_kind_of_server(self) -> McpSettings:
        """A command *and* an explicit origin is ambiguous: refuse rather than guess."""
        if self.command is not None and self.origin and "origin" in self.model_fields_set:
            raise ValueError(
                "DOCLING_MCP_COMMAND and DOCLING_MCP_ORIGIN are both set: "
                "set the command (a stdio child per process) or the origin (a server), not both "
                "(DOCLING_MCP_ORIGIN= empty counts as not set)"
            )
        if self.command is None and not self.origin:
            raise ValueError("DOCLING_MCP_ORIGIN is empty and there is no DOCLING_MCP_COMMAND")
        return self

    @model_validator(mode="after")
    def _auth_has_secret(self) -> McpSettings:
        if self.auth == "bearer" and self.secret is None:
            raise ValueError("DOCLING_MCP_AUTH=bearer needs DOCLING_MCP_TOKEN")
        if self.auth == "api-key" and self.secret is None:
            raise ValueError("DOCLING_MCP_AUTH=api-key needs DOCLING_MCP_API_KEY")
        if self.auth == OAUTH:
            self._check_oauth()
        if self.command is not None:
            check_no_auth_for_stdio(self.auth, "DOCLING_MCP_COMMAND")
        if self.timeout_small_below_bytes > self.timeout_medium_below_bytes:
            raise ValueError("DOCLANE_TIMEOUT_SMALL_BELOW_BYTES exceeds ..._MEDIUM_BELOW_BYTES")
        return self

    def _check_oauth(self) -> None:
        if not (self.client_id or "").strip():
            raise ValueError(f"DOCLING_MCP_AUTH={OAUTH} needs DOCLING_MCP_CLIENT_ID")
        has_secret = self.client_secret is not None and bool(self.client_secret.get_secret_value())
        if has_secret == (self.client_key_file is not None):
            raise ValueError(
                f"DOCLING_MCP_AUTH={OAUTH} needs exactly one of DOCLING_MCP_CLIENT_SECRET "
                "(client_secret_basic) and DOCLING_MCP_CLIENT_KEY_FILE (private_key_jwt)"
            )
        if self.client_key_file is not None and not self.client_key_file.is_file():
            raise ValueError(
                f"DOCLING_MCP_CLIENT_KEY_FILE={self.client_key_file} is not a readable file"
            )

    @property
    def secret(self) -> SecretStr | None:
        """The credential ``auth`` sends: the token, or for ``api-key`` the key (else the token)."""
        candidates = (self.api_key, self.token) if self.auth == "api-key" else (self.token,)
        for candidate in candidates:
            if candidate is not None and candidate.get_secret_value():
                return candidate
        return None

    @property
    def endpoints(self) -> list[str]:
        """Every configured endpoint URL, in order (several make a pool), or the stdio command."""
        if self.command is not None:
            return [stdio_endpoint(self.command)]
        return [normalize_endpoint(origin) for origin in split_origins(self.origin)]

    @property
    def endpoint(self) -> str:
        """The first endpoint: the one a single client talks to."""
        return self.endpoints[0]


def check_no_auth_for_stdio(auth: str, command_from: str) -> None:
    """Refuse credentials for a stdio child rather than ignore them silently."""
    if auth != "none":
        raise ValueError(
            f"DOCLING_MCP_AUTH={auth} with {command_from}: auth applies to HTTP servers only; "
            "a stdio child is this process's own pipe and takes no credentials "
            "(unset DOCLING_MCP_AUTH, or use an origin)"
        )


def environment_variables() -> list[str]:
    """Every environment variable these settings read, in declaration order."""
    names: list[str] = []
    for field in McpSettings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.extend(str(choice) for choice in alias.choices)
    return names


def split_origins(value: str) -> list[str]:
    origins = [part.strip() for part in value.split(",") if part.strip()]
    if not origins:
        raise ValueError("DOCLING_MCP_ORIGIN is empty")
    for origin in origins:
        normalize_endpoint(origin)
    return origins
