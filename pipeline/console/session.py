"""Who is signed in to the console: a signed session cookie, its CSRF token, the sign-in check.

A person signs in once with the API token (a form; the token never appears in a URL) and gets a
cookie: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it),
``Secure`` over HTTPS, scoped to ``/console``. Its value is signed by itsdangerous with a key
derived from the API token, so it is valid on every API process that shares the token, is
worthless once the token changes, and expires after :data:`SESSION_MAX_AGE_S`. It holds one
random value, the session's CSRF token, which every form that changes something carries back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.exceptions import HTTPException

if TYPE_CHECKING:
    from pipeline.api.app import ApiContext

COOKIE = "doclane_console"
#: A session lasts a working day; signing in again is one form.
SESSION_MAX_AGE_S = 12 * 3600
#: Where fetch() sends the CSRF token (a form sends the field ``csrf``).
CSRF_HEADER = "x-csrf-token"


class SignInRequired(PermissionError):
    """No valid session cookie: a page redirects to the sign-in form, a fetch gets 401."""


class CsrfRefused(PermissionError):
    """A request that changes something came without its session's CSRF token."""


@dataclass(frozen=True)
class Session:
    csrf: str


def token_accepted(ctx: ApiContext, token: str) -> bool:
    """The console's one sign-in check: the API's own bearer-token check, given the token typed
    into the form (so whatever the API accepts, and only that, signs a person in)."""
    from pipeline.api.app import BearerToken  # the API app mounts the console: no import cycle

    check = BearerToken(_api_token(ctx))
    try:
        check(HTTPAuthorizationCredentials(scheme="Bearer", credentials=token))
    except HTTPException:
        return False
    return True


class Sessions:
    """Issues, reads and ends sessions for one API process."""

    def __init__(self, ctx: ApiContext) -> None:
        # The API token itself is never the key: a cookie must not be a way to test guesses of it.
        self._enabled = bool(_api_token(ctx))  # no token: no one signs in, no cookie is valid
        key = hmac.new(_api_token(ctx).encode(), b"doclane console session", hashlib.sha256)
        self._signer = URLSafeTimedSerializer(key.hexdigest(), salt="doclane.console.session")

    def start(self, request: Request, response: Response) -> Session:
        session = Session(csrf=secrets.token_urlsafe(24))
        response.set_cookie(
            COOKIE,
            self._signer.dumps({"csrf": session.csrf}),
            max_age=SESSION_MAX_AGE_S,
            path="/console",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return session

    def end(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")

    def current(self, request: Request) -> Session:
        """The request's session; :class:`SignInRequired` when it has none that is valid."""
        value = request.cookies.get(COOKIE)
        if not value or not self._enabled:
            raise SignInRequired
        try:
            data = self._signer.loads(value, max_age=SESSION_MAX_AGE_S)
        except BadSignature as exc:  # also SignatureExpired
            raise SignInRequired from exc
        if not isinstance(data, dict) or not isinstance(data.get("csrf"), str):
            raise SignInRequired
        return Session(csrf=data["csrf"])


def check_csrf(session: Session, given: str | None) -> None:
    """:class:`CsrfRefused` unless ``given`` is the session's CSRF token (constant time)."""
    if not given or not secrets.compare_digest(given.encode(), session.csrf.encode()):
        raise CsrfRefused


def _api_token(ctx: ApiContext) -> str:
    return ctx.settings.api_token.get_secret_value() if ctx.settings.api_token else ""
