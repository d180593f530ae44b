"""Settings of ``doclane api``: where it listens, the tokens clients send, how it caches.

They live with the tree rather than in ``pipeline.api``, because the tree is read by workers
too, which never load the HTTP API.

Tokens have roles (``DOCLANE_API_TOKENS``), each allowing what the ones before it allow:

==========  ====================================================================
role        may
==========  ====================================================================
``read``    every GET: jobs, job details, results, stats
``submit``  ``read``, and submit jobs (``POST /v1/jobs``: sources or an upload)
``admin``   everything: cancel and retry jobs besides
==========  ====================================================================

The single ``DOCLANE_API_TOKEN`` of earlier releases is still read, as an ``admin`` token.

A token may carry a tenant (the JSON form's ``"tenant"``): it submits as that tenant only, and
sees and acts on that tenant's jobs only (any other job is 404, as one that does not exist);
with the ``submit`` role it may also cancel and retry them. A token without one (the
``name:role:token`` form) sees every tenant's jobs.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from pipeline.jobs.tenants import TENANT_PATTERN
from pipeline.support.settings import Section

Role = Literal["read", "submit", "admin"]
#: The roles from least to most allowed: each allows what those before it allow.
ROLES: tuple[Role, ...] = ("read", "submit", "admin")
#: How ``DOCLANE_API_TOKEN`` is named where a token's name is shown (logs, 403 answers).
LEGACY_TOKEN_NAME = "DOCLANE_API_TOKEN"


class ApiToken(BaseModel):
    """One client's token: a name to tell it by (never the secret), its role, the secret, and
    the tenant it speaks for (None: every tenant, as an operator)."""

    model_config = ConfigDict(frozen=True, hide_input_in_errors=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,64}$")
    role: Role
    token: SecretStr = Field(min_length=1)
    tenant: str | None = Field(default=None, pattern=TENANT_PATTERN)

    @field_validator("tenant", mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        """An empty tenant is refused, said so: it must not pass for a token of every tenant."""
        if value == "":
            raise ValueError('an empty tenant: leave "tenant" out for a token of every tenant')
        return value


class ApiSettings(Section):
    # No input in validation errors: a malformed token list must not print its secrets.
    model_config = SettingsConfigDict(hide_input_in_errors=True)

    #: The address ``doclane api`` listens on (``0.0.0.0`` in a container).
    api_host: str = "127.0.0.1"
    #: Its port (0: any free one, printed in uvicorn's start-up line).
    api_port: int = Field(default=8080, ge=0, le=65535)
    #: A bearer token with the ``admin`` role (what every /v1 endpoint asked for before tokens
    #: had roles). /healthz, /readyz, /metrics and the status page need none.
    api_token: SecretStr | None = None
    #: Tokens with roles (read, submit, admin), comma-separated ``name:role:token``
    #: (``ci:submit:3f9a...,grafana:read:77c1...``; the name is what logs and answers show, never
    #: the token), or a JSON list of ``{"name", "role", "token"}`` objects, each with an optional
    #: ``"tenant"``: such a token submits as that tenant and sees only its jobs (the API makes
    #: the tenant at start if it does not exist). ``doclane api`` refuses to start with neither
    #: this nor DOCLANE_API_TOKEN.
    api_tokens: Annotated[tuple[ApiToken, ...], NoDecode] = ()
    #: Seconds between refreshes of the status page.
    api_page_refresh_s: int = Field(default=5, ge=1)
    #: Failed console sign-ins one client address may make within
    #: DOCLANE_CONSOLE_SIGNIN_WINDOW_S; past them its sign-ins are refused (E114, HTTP 429)
    #: until the oldest failure leaves the window. Each API process counts on its own.
    console_signin_failures: int = Field(default=10, ge=1)
    #: The window of DOCLANE_CONSOLE_SIGNIN_FAILURES, in seconds.
    console_signin_window_s: float = Field(default=300.0, gt=0)

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        tokens = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, role, token = [*item.split(":", 2), "", ""][:3]
            if not token:
                raise ValueError("each token is name:role:token (the token itself left out)")
            tokens.append({"name": name, "role": role, "token": token})
        return tokens

    @model_validator(mode="after")
    def _distinct(self) -> ApiSettings:
        tokens = self.tokens()
        if len({t.name for t in tokens}) < len(tokens):
            raise ValueError("DOCLANE_API_TOKENS: two tokens have the same name")
        if len({t.token.get_secret_value() for t in tokens}) < len(tokens):
            raise ValueError(
                "DOCLANE_API_TOKENS: two tokens are the same secret (which role would it have?)"
            )
        return self

    def tokens(self) -> tuple[ApiToken, ...]:
        """Every token the API accepts: DOCLANE_API_TOKENS, and DOCLANE_API_TOKEN as admin."""
        legacy = self.api_token.get_secret_value() if self.api_token else ""
        if not legacy:
            return self.api_tokens
        legacy_token = ApiToken(name=LEGACY_TOKEN_NAME, role="admin", token=SecretStr(legacy))
        return (legacy_token, *self.api_tokens)
