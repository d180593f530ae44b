"""Who is calling ``/v1``, and whether the token's role allows the request.

Every configured token is compared with the one presented, all of them every time, as SHA-256
digests with :func:`hmac.compare_digest`: the time taken says neither which token nor how much
of one matched, nor how long the tokens are. A token none of them is is looked up by its digest
among the tokens kept in PostgreSQL (``doclane tokens create``), as the row is now: a revoked or
expired one is refused at the next request by every API process. No token, or an unknown one:
401 ``unauthorized``.
A bearer JWT of the OpenID Connect issuer (DOCLANE_OIDC_ISSUER) is checked last
(:mod:`pipeline.access.oidc`): one refused is 401 with E124 and its reason. A known token whose
role falls short: 403 with E109, naming the token by its name.

::

    access = TokenRoles(settings.tokens())
    router = APIRouter(dependencies=[Depends(access.require("read"))])
    @router.post("/jobs/{id}/cancel", dependencies=[Depends(access.require("admin"))])
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from errors import RoleForbidden
from pipeline.access.oidc import OidcIssuer, looks_like_jwt
from pipeline.jobs.tenants import TenantScope, scope_of
from pipeline.settings.api import ROLES, ApiToken, Role
from pipeline.store.access import ApiTokens

_BEARER = HTTPBearer(
    auto_error=False,
    description="A token of DOCLANE_API_TOKENS (or DOCLANE_API_TOKEN), or one made by "
    "`doclane tokens create` / POST /v1/tokens",
)

#: Where the caller is kept in the request's scope, for the audit trail and the rate limit.
CALLER_STATE = "doclane.caller"


@dataclass(frozen=True, slots=True)
class Caller:
    """The token a request came with, by its name and role, and whose jobs it speaks for (a
    token always says: there is no default that could open every tenant's jobs by omission)."""

    name: str
    role: Role
    scope: TenantScope
    #: Who vouches for the name: None for a token (the environment's or the store's), the
    #: issuer for a JWT's subject.
    issuer: str | None = None

    def may(self, role: Role) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    def may_change(self) -> bool:
        """Whether it may cancel and retry (the jobs it sees): an admin, or a tenant's token
        with the submit role (its own jobs are its to manage)."""
        return self.may("admin") or (not self.scope.every and self.may("submit"))


def require_operator(caller: Caller) -> Caller:
    """``caller``, when it is an operator: an admin of every tenant; E109 otherwise. Tokens and
    the audit trail span the tenants: a tenant's admin that made a token of every tenant, or read
    the others' actions, would be through the wall."""
    if not (caller.may("admin") and caller.scope.every):
        raise RoleForbidden(
            f"the token {caller.name!r} is {caller.role} of {caller.scope}; tokens and the audit "
            "trail are an operator's (admin of every tenant)",
            detail={"token": caller.name, "role": caller.role, "needs": "admin of every tenant"},
        )
    return caller


class TokenRoles:
    """The dependencies that guard /v1: :meth:`caller` (401 unless a token matches) and
    :meth:`require` (403 unless its role allows)."""

    def __init__(
        self,
        tokens: Sequence[ApiToken],
        stored: ApiTokens | None = None,
        issuer: OidcIssuer | None = None,
    ) -> None:
        self._known = [
            (_digest(t.token.get_secret_value()), Caller(t.name, t.role, scope_of(t.tenant)))
            for t in tokens
        ]
        self._stored = stored
        self.issuer = issuer
        self._required: dict[Role, Callable[..., Caller]] = {}

    def caller(
        self,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
        request: Request,
    ) -> Caller:
        found = self.check(credentials.credentials if credentials else "")
        if found is None:
            raise HTTPException(401, "a valid bearer token is required")
        request.scope.setdefault("state", {})[CALLER_STATE] = found
        return found

    def check(self, token: str) -> Caller | None:
        """Whose ``token`` is: an environment token's caller, a live stored token's, a valid
        JWT's subject (:mod:`pipeline.access.oidc`; an invalid one raises E124), or None."""
        if not token:
            return None
        given = _digest(token)
        found: Caller | None = None
        for digest, caller in self._known:  # every one, match or not: the same time for all
            if hmac.compare_digest(given, digest) and found is None:
                found = caller
        if found is None and self._stored is not None:
            live = self._stored.find(given)
            if live is not None:
                found = Caller(live.name, live.role, scope_of(live.tenant))
        if found is None and self.issuer is not None and looks_like_jwt(token):
            who = self.issuer.verify(token)
            found = Caller(who.subject, who.role, who.scope, who.issuer)
        return found

    def require(self, role: Role) -> Callable[..., Caller]:
        """A dependency: the caller, when its token's role allows ``role``'s requests. One
        function a role, so that a route's own ``Depends(require(role))`` is the router's, and
        FastAPI checks the token once a request."""
        if role not in self._required:
            self._required[role] = self._require(role)
        return self._required[role]

    def _require(self, role: Role) -> Callable[..., Caller]:

        # A default, not Annotated: annotations are strings here, and FastAPI resolves them in
        # the module's globals, where ``self`` is not.
        def allowed(caller: Caller = Depends(self.caller)) -> Caller:  # noqa: B008
            if not caller.may(role):
                raise RoleForbidden(
                    f"the token {caller.name!r} has the role {caller.role}; this request needs "
                    f"{role}",
                    detail={"token": caller.name, "role": caller.role, "needs": role},
                )
            return caller

        return allowed

    def operator(self) -> Callable[..., Caller]:
        """A dependency: the caller, when it is an operator (:func:`require_operator`)."""

        def allowed(caller: Caller = Depends(self.caller)) -> Caller:  # noqa: B008
            return require_operator(caller)

        return allowed

    def changer(self) -> Callable[..., Caller]:
        """A dependency: the caller, when it may cancel and retry (:meth:`Caller.may_change`)."""

        def allowed(caller: Caller = Depends(self.caller)) -> Caller:  # noqa: B008
            if not caller.may_change():
                raise RoleForbidden(
                    f"the token {caller.name!r} has the role {caller.role}; this request needs "
                    "admin (or submit, for a token of a tenant)",
                    detail={"token": caller.name, "role": caller.role, "needs": "admin"},
                )
            return caller

        return allowed


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
