"""Who is calling ``/v1``, and whether the token's role allows the request.

Every configured token is compared with the one presented, all of them every time, as SHA-256
digests with :func:`hmac.compare_digest`: the time taken says neither which token nor how much
of one matched, nor how long the tokens are. No token, or an unknown one: 401 ``unauthorized``.
A known token whose role falls short: 403 with E109, naming the token by its name.

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

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from errors import RoleForbidden
from pipeline.settings.api import ROLES, ApiToken, Role

_BEARER = HTTPBearer(
    auto_error=False, description="A token of DOCLANE_API_TOKENS (or DOCLANE_API_TOKEN)"
)


@dataclass(frozen=True, slots=True)
class Caller:
    """The token a request came with, by its name and role, and the tenant it speaks for
    (None: every tenant)."""

    name: str
    role: Role
    tenant: str | None = None

    def may(self, role: Role) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    def sees(self, tenant: str) -> bool:
        """Whether a job of ``tenant`` exists for this caller (else it is answered 404)."""
        return self.tenant is None or self.tenant == tenant

    def may_change(self) -> bool:
        """Whether it may cancel and retry (the jobs it sees): an admin, or a tenant's token
        with the submit role (its own jobs are its to manage)."""
        return self.may("admin") or (self.tenant is not None and self.may("submit"))


class TokenRoles:
    """The dependencies that guard /v1: :meth:`caller` (401 unless a token matches) and
    :meth:`require` (403 unless its role allows)."""

    def __init__(self, tokens: Sequence[ApiToken]) -> None:
        self._known = [
            (_digest(t.token.get_secret_value()), Caller(t.name, t.role, t.tenant)) for t in tokens
        ]
        self._required: dict[Role, Callable[[Caller], Caller]] = {}

    def caller(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
    ) -> Caller:
        given = _digest(credentials.credentials if credentials else "")
        found: Caller | None = None
        for digest, caller in self._known:  # every one, match or not: the same time for all
            if hmac.compare_digest(given, digest) and found is None:
                found = caller
        if found is None or credentials is None or not credentials.credentials:
            raise HTTPException(401, "a valid bearer token is required")
        return found

    def require(self, role: Role) -> Callable[[Caller], Caller]:
        """A dependency: the caller, when its token's role allows ``role``'s requests. One
        function a role, so that a route's own ``Depends(require(role))`` is the router's, and
        FastAPI checks the token once a request."""
        if role not in self._required:
            self._required[role] = self._require(role)
        return self._required[role]

    def _require(self, role: Role) -> Callable[[Caller], Caller]:

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

    def changer(self) -> Callable[[Caller], Caller]:
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
