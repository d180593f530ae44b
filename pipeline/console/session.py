"""Who is signed in to the console: a signed session cookie, its CSRF token, the sign-in check.

A person signs in once with an API token (a form; the token never appears in a URL) and gets a
cookie: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it),
``Secure`` over HTTPS, scoped to ``/console``. Its value is signed by itsdangerous with a key
derived from every token the API accepts (``DOCLANE_API_TOKENS``, ``DOCLANE_API_TOKEN``), so it
is valid on every API process with the same tokens, is worthless once any token or role
changes, and expires after :data:`SESSION_MAX_AGE_S`. It holds the token's name and role (what
the console lets the person do, as the API would: read, submit, admin) and a random CSRF token,
which every form that changes something carries back. A session of a token kept in PostgreSQL
(``doclane tokens create``) is looked at again on every request: once the token is revoked or
has expired, its sessions are signed out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from errors import PipelineError, RoleForbidden
from pipeline.api.auth import CALLER_STATE, Caller, require_operator
from pipeline.api.context import ApiContext
from pipeline.jobs.tenants import scope_of
from pipeline.settings.api import ROLES, Role
from pipeline.store.access import ApiTokens

COOKIE = "doclane_console"
#: A session lasts a working day; signing in again is one form.
SESSION_MAX_AGE_S = 12 * 3600
#: Where fetch() sends the CSRF token (a form sends the field ``csrf``).
CSRF_HEADER = "x-csrf-token"


@dataclass(frozen=True, slots=True)
class ConsoleCookie:
    """A cookie of the console's own: a signed value no script may read (``HttpOnly``), sent
    back only below ``path``, over HTTPS alone when the console is served so, kept
    ``max_age_s``. The session's and the single sign-on flow's differ in these alone."""

    name: str
    path: str
    samesite: Literal["strict", "lax"]
    max_age_s: int

    def set(self, request: Request, response: Response, value: str) -> None:
        response.set_cookie(
            self.name,
            value,
            max_age=self.max_age_s,
            path=self.path,
            httponly=True,
            samesite=self.samesite,
            secure=request.url.scheme == "https",
        )

    def clear(self, response: Response) -> None:
        response.delete_cookie(self.name, path=self.path, httponly=True, samesite=self.samesite)


#: The session: strict, so that no other site's link or form arrives signed in.
SESSION_COOKIE = ConsoleCookie(COOKIE, "/console", "strict", SESSION_MAX_AGE_S)


class SignInRequired(PermissionError):
    """No valid session cookie: a page redirects to the sign-in form, a fetch gets 401."""


class CsrfRefused(PermissionError):
    """A request that changes something came without its session's CSRF token."""


@dataclass(frozen=True)
class Session:
    csrf: str
    caller: Caller

    def require(self, role: Role) -> None:
        """E109 (a 403 page) unless the signed-in token's role allows ``role``'s requests, as
        the API's own check says for the same token."""
        if not self.caller.may(role):
            raise RoleForbidden(
                f"the token {self.caller.name!r} has the role {self.caller.role}; this needs "
                f"{role}",
                detail={"token": self.caller.name, "role": self.caller.role, "needs": role},
            )

    def require_operator(self) -> None:
        """E109 unless the token is an operator's, as the API's tokens and audit routes say."""
        require_operator(self.caller)

    def require_change(self) -> None:
        """E109 unless the token may cancel and retry (admin; a tenant's submit token, its own
        jobs), as the API's check says."""
        if not self.caller.may_change():
            raise RoleForbidden(
                f"the token {self.caller.name!r} has the role {self.caller.role}; this needs "
                "admin (or submit, for a token of a tenant)",
                detail={"token": self.caller.name, "role": self.caller.role, "needs": "admin"},
            )


def token_accepted(ctx: ApiContext, token: str) -> Caller | None:
    """The console's one sign-in check: the API's own token check (``TokenRoles.caller``),
    given the token typed into the form; whose token it is and its role, or None."""
    try:
        return ctx.guard.check(token)
    except PipelineError:  # a JWT refused (E124), its tenant unknown, or no role of doclane's
        return None


class Sessions:
    """Issues, reads and ends sessions for one API process."""

    def __init__(self, ctx: ApiContext) -> None:
        tokens = ctx.settings.tokens()
        self._enabled = bool(tokens)  # no token: no one signs in, no cookie is valid
        # Never a token itself: a cookie must not be a way to test guesses of one. Every token
        # and role is in the key, so changing any of them ends every session.
        known = sorted(
            f"{t.name}:{t.role}:{t.tenant or ''}:{t.token.get_secret_value()}" for t in tokens
        )
        key = hmac.new("\n".join(known).encode(), b"doclane console session", hashlib.sha256)
        self._key = key.hexdigest()
        self._signer = self.signer("doclane.console.session")
        # The names of the environment's tokens: any other name signed in is a stored token's,
        # or a JWT's subject, looked at again on every request (revoked: signed out).
        self._env_names = {t.name for t in tokens}
        self._stored: ApiTokens | None = ctx.store.tokens

    def signer(self, salt: str) -> URLSafeTimedSerializer:
        """A signer with the sessions' key (every API process of the fleet has it)."""
        return URLSafeTimedSerializer(self._key, salt=salt)

    def start(self, request: Request, response: Response, caller: Caller) -> Session:
        session = Session(csrf=secrets.token_urlsafe(24), caller=caller)
        value = {
            "csrf": session.csrf,
            "name": caller.name,
            "role": caller.role,
            "tenant": caller.scope.tenant,  # None: every tenant
            "issuer": caller.issuer,
        }
        SESSION_COOKIE.set(request, response, self._signer.dumps(value))
        return session

    def end(self, response: Response) -> None:
        SESSION_COOKIE.clear(response)

    def current(self, request: Request) -> Session:
        """The request's session; :class:`SignInRequired` when it has none that is valid."""
        value = request.cookies.get(COOKIE)
        if not value or not self._enabled:
            raise SignInRequired
        try:
            data = self._signer.loads(value, max_age=SESSION_MAX_AGE_S)
        except BadSignature as exc:  # also SignatureExpired
            raise SignInRequired from exc
        if not isinstance(data, dict) or data.get("role") not in ROLES:
            raise SignInRequired
        tenant, issuer = data.get("tenant"), data.get("issuer")
        try:
            scope = scope_of(str(tenant) if tenant is not None else None)
        except PipelineError as exc:  # not a tenant's name: no session this code wrote
            raise SignInRequired from exc
        caller = Caller(str(data["name"]), data["role"], scope, str(issuer) if issuer else None)
        stored = caller.issuer is None and caller.name not in self._env_names
        if stored and (self._stored is None or not self._stored.is_live(caller.name)):
            raise SignInRequired  # its token was revoked, or has expired
        request.scope.setdefault("state", {})[CALLER_STATE] = caller  # for the audit trail
        return Session(csrf=str(data["csrf"]), caller=caller)


def check_csrf(session: Session, given: str | None) -> None:
    """:class:`CsrfRefused` unless ``given`` is the session's CSRF token (constant time)."""
    if not given or not secrets.compare_digest(given.encode(), session.csrf.encode()):
        raise CsrfRefused
