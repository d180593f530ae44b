"""Stored API tokens: the secret made once, only its digest kept.

A secret is 32 random bytes (``secrets.token_urlsafe``) behind the prefix ``dl_`` (so a secret
scanner can tell one); the store keeps its SHA-256 digest, which is what every request's token
is looked up by. ``--expires 90d`` is a duration of whole minutes, hours, days or weeks.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pipeline.settings.api import ApiSettings, Role
from pipeline.store.access import StoredToken, TokenNameTaken
from pipeline.store.store import JobStore

#: What every stored token's secret starts with.
SECRET_PREFIX = "dl_"
TOKEN_NAME_PATTERN = r"^[A-Za-z0-9_.@-]{1,64}$"
_DURATION = re.compile(r"^(\d{1,5})([mhdw])$")
_UNIT = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def token_digest(secret: str) -> bytes:
    """What a token is stored and looked up by."""
    return hashlib.sha256(secret.encode()).digest()


def parse_expiry(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """``90d`` -> that long from now; None or ``never`` -> no expiry; ``ValueError`` else."""
    if text is None or text.strip().lower() in ("", "never"):
        return None
    match = _DURATION.match(text.strip().lower())
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"an expiry is such as 30m, 12h, 90d or 2w (or never), not {text!r}")
    span = timedelta(**{_UNIT[match.group(2)]: int(match.group(1))})
    return (now or datetime.now(UTC)) + span


@dataclass(frozen=True)
class IssuedToken:
    """A token just made: its secret (shown once, never again) and its row."""

    secret: str
    token: StoredToken


def issue_token(
    store: JobStore,
    api: ApiSettings,
    name: str,
    *,
    role: Role,
    created_by: str,
    tenant: str | None = None,
    expires: str | None = None,
) -> IssuedToken:
    """Make a token: ``ValueError`` for a bad name, role, expiry or a name taken (by a stored
    token, or one of the environment's); an unknown tenant is made, as an environment token's
    tenant is when the API starts."""
    if not re.match(TOKEN_NAME_PATTERN, name):
        raise ValueError(f"a token's name is 1-64 of A-Z a-z 0-9 _ . @ -, not {name!r}")
    if role not in ("read", "submit", "admin"):
        raise ValueError(f"a role is read, submit or admin, not {role!r}")
    if name in {t.name for t in api.tokens()}:
        raise TokenNameTaken(f"{name!r} is the name of a token of the environment")
    expires_at = parse_expiry(expires)
    if tenant is not None:
        store.tenants.ensure([tenant])
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    row = store.tokens.create(
        name,
        role=role,
        digest=token_digest(secret),
        created_by=created_by,
        tenant=tenant,
        expires_at=expires_at,
    )
    return IssuedToken(secret=secret, token=row)
