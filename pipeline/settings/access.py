"""Settings of access to the API: rate limits and single sign-on.

Read by the API and the console, and by the CLI's settings listing, so they live with the tree
rather than in ``pipeline.api``. The audit trail's retention is the reconciler's
(``DOCLANE_AUDIT_RETENTION_DAYS``, in ``pipeline.jobs.settings``): its pass applies it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from pipeline.support.settings import CommaList, Section

#: A rate as ``limits`` parses it: a count per period (``20/second``, ``100 per minute``).
RATE_PATTERN = r"^\s*\d+\s*(/|per)\s*\d*\s*(second|minute|hour|day)s?\s*$"


class AccessSettings(Section):
    #: Requests one caller (a token, a JWT subject) may make to /v1, shared by every API
    #: process through Redis (DOCLANE_REDIS_URL): a rate such as ``20/second`` or
    #: ``1000/minute``. Past it: 429 with Retry-After and the code E122. Empty: no limit.
    api_rate_limit: str = Field(default="", pattern=r"^$|" + RATE_PATTERN)
    #: Rates for some roles or tokens instead of DOCLANE_API_RATE_LIMIT, comma-separated
    #: ``who=rate`` where who is a role (read, submit, admin) or a token's name
    #: (``admin=100/second,ci-bulk=5/second``); a token's own rate wins over its role's.
    api_rate_limits: Annotated[dict[str, str], NoDecode] = {}
    #: The OpenID Connect issuer whose bearer JWTs the API accepts (its discovery document is
    #: ``<issuer>/.well-known/openid-configuration``). Empty: no single sign-on.
    oidc_issuer: str = ""
    #: The audience the JWTs must name (``aud``): the API's client id at the issuer.
    oidc_audience: str = ""
    #: The signing algorithms accepted (never ``none``, never an HMAC one: the API holds no
    #: shared secret with the issuer).
    oidc_algorithms: CommaList[str] = ("RS256", "ES256", "PS256", "EdDSA")
    #: The claim holding the caller's roles (a list, or one string).
    oidc_roles_claim: str = "roles"
    #: The claim holding the caller's tenant; absent: every tenant (an operator).
    oidc_tenant_claim: str = "tenant"
    #: Values of the roles claim mapped to doclane's roles, comma-separated ``value=role``
    #: (``doclane-admins=admin,doclane-ci=submit``); the role names themselves always map.
    oidc_role_map: Annotated[dict[str, str], NoDecode] = {}
    #: Seconds of clock difference allowed on ``exp``, ``nbf`` and ``iat``.
    oidc_leeway_s: int = Field(default=30, ge=0, le=300)
    #: Seconds the issuer's keys are kept before they are fetched again (an unknown ``kid``
    #: fetches them at once, at most once a minute: keys rotate without a restart).
    oidc_jwks_cache_s: int = Field(default=3600, ge=60)
    #: The console's client at the issuer (authorization code with PKCE); empty: the console
    #: offers only the token form.
    oidc_client_id: str = ""
    #: Its secret, for an issuer that requires one of a confidential client (PKCE alone
    #: otherwise).
    oidc_client_secret: SecretStr | None = None
    #: Scopes the console asks for.
    oidc_scopes: CommaList[str] = ("openid", "profile")

    @field_validator("api_rate_limits", "oidc_role_map", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        pairs: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, sep, got = item.partition("=")
            if not sep or not key.strip() or not got.strip():
                raise ValueError(f"each item is key=value, not {item!r}")
            pairs[key.strip()] = got.strip()
        return pairs

    @field_validator("api_rate_limits")
    @classmethod
    def _rates(cls, value: dict[str, str]) -> dict[str, str]:
        for key, rate in value.items():
            if not re.match(RATE_PATTERN, rate):
                raise ValueError(f"{key}={rate}: a rate is such as 20/second or 1000/minute")
        return value

    @field_validator("oidc_role_map")
    @classmethod
    def _roles(cls, value: dict[str, str]) -> dict[str, str]:
        for key, role in value.items():
            if role not in ("read", "submit", "admin"):
                raise ValueError(f"{key!r} maps to {role!r}, not a role (read, submit, admin)")
        return value

    @field_validator("oidc_algorithms")
    @classmethod
    def _algorithms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alg in value:
            if alg.lower() == "none" or alg.upper().startswith("HS"):
                raise ValueError(f"{alg} is never accepted (no signature, or a shared secret)")
        return value

    def rate_for(self, name: str, role: str) -> str:
        """The rate limiting a caller: its own, its role's, the default (empty: none)."""
        return (
            self.api_rate_limits.get(name) or self.api_rate_limits.get(role) or self.api_rate_limit
        )
