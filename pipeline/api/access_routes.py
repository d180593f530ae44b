"""``/v1/tokens`` and ``/v1/audit``: stored tokens and the audit trail, for operators (admins of
every tenant: a token a tenant's admin made could be every tenant's, E109).

What ``doclane tokens create|list|revoke`` and ``doclane audit`` do, over HTTP: a token made
here answers its secret once (never again: only its digest is kept); a revoked one is refused
by every API process at its next request. Tokens of the environment are not listed here (they
are the operator's, in the deployment's configuration).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from pipeline.access.tokens import TOKEN_NAME_PATTERN, issue_token
from pipeline.admin.jobs import parse_since
from pipeline.api.auth import Caller, TokenRoles
from pipeline.api.context import ApiContext
from pipeline.jobs.tenants import TENANT_PATTERN
from pipeline.settings.api import Role
from pipeline.store.access import AuditEntry, AuditFilter, StoredToken, TokenNameTaken
from pipeline.store.connection import TEXT_PATTERN


class TokenRequest(BaseModel):
    name: str = Field(pattern=TOKEN_NAME_PATTERN)
    role: Role
    tenant: str | None = Field(default=None, pattern=TENANT_PATTERN)
    expires: str | None = Field(
        default=None,
        pattern=r"^(\d{1,5}[mhdw]|never)$",
        description="How long it is valid: 30m, 12h, 90d, 2w; never (the default).",
    )


class TokenCreated(BaseModel):
    token: str = Field(description="The secret: shown this once, never again.")
    stored: StoredToken


class TokenList(BaseModel):
    tokens: list[StoredToken]


class TokenOut(BaseModel):
    stored: StoredToken


class AuditPage(BaseModel):
    entries: list[AuditEntry]
    next_before: int | None = Field(
        default=None, description="The next page's `before` (set when this page is full)."
    )


def access_router(ctx: ApiContext, access: TokenRoles) -> APIRouter:
    router = APIRouter()
    admin = access.operator()  # every tenant's tokens and actions: not a tenant's admin's

    @router.get("/tokens", response_model=TokenList)
    def list_tokens(
        include_revoked: bool = False,
        _: Caller = Depends(admin),  # noqa: B008
    ) -> TokenList:
        """The stored tokens (never a secret); with ``include_revoked``, the revoked and
        expired ones too (admin)."""
        return TokenList(tokens=ctx.store.tokens.list_all(include_gone=include_revoked))

    @router.post("/tokens", status_code=201, response_model=TokenCreated)
    def create_token(
        asked: TokenRequest,
        caller: Caller = Depends(admin),  # noqa: B008
    ) -> TokenCreated:
        """Make a token: its secret is in this answer only (admin)."""
        try:
            issued = issue_token(
                ctx.store,
                ctx.settings,
                asked.name,
                role=asked.role,
                tenant=asked.tenant,
                expires=asked.expires,
                created_by=caller.name,
            )
        except TokenNameTaken as exc:
            raise HTTPException(409, str(exc)) from exc
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from exc
        return TokenCreated(token=issued.secret, stored=issued.token)

    @router.delete("/tokens/{name}", response_model=TokenOut)
    def revoke_token(
        name: Annotated[str, Path(pattern=TOKEN_NAME_PATTERN)],
        _: Caller = Depends(admin),  # noqa: B008
    ) -> TokenOut:
        """Revoke a token now: every API process refuses it at its next request (admin)."""
        revoked = ctx.store.tokens.revoke(name)
        if revoked is None:
            raise HTTPException(404, f"no live stored token is named {name!r}")
        return TokenOut(stored=revoked)

    @router.get("/audit", response_model=AuditPage)
    def audit(
        *,
        since: Annotated[
            str | None, Query(pattern=r"^\d{1,4}[smhdw]$", description="e.g. 30m, 1h, 2d, 1w")
        ] = None,
        actor: Annotated[str | None, Query(max_length=300, pattern=TEXT_PATTERN)] = None,
        action: Annotated[str | None, Query(max_length=100, pattern=TEXT_PATTERN)] = None,
        before: Annotated[int | None, Query(ge=1)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        _: Caller = Depends(admin),  # noqa: B008
    ) -> AuditPage:
        """The audit trail, newest first (admin): who did what, when, from where, the outcome."""
        moment: datetime | None = parse_since(since) if since is not None else None
        filters = AuditFilter(since=moment, actor=actor, action=action, before=before, limit=limit)
        found = ctx.store.audit.list(filters)
        full = len(found) == limit and found[-1].id is not None
        return AuditPage(entries=found, next_before=found[-1].id if full else None)

    return router
