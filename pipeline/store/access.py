"""Access in the store: API tokens by their digest, the audit trail, submissions' keys.

A :class:`~pipeline.store.store.JobStore` has them as ``tokens``, ``audit`` and ``idempotency``. The
store never sees a token's secret: its callers hand it the SHA-256 digest (``pipeline.access``
makes the secret and the digest). Every look-up reads the row as it is now, so a token revoked
by one process is refused by every other at its next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from pipeline.store.pool import OnPool
from pipeline.store.queries import query

TokenRole = Literal["read", "submit", "admin"]
#: How long a submission's Idempotency-Key answers the same again (a day).
IDEMPOTENCY_KEEP_S = 24 * 3600.0


class StoredToken(BaseModel):
    """A token kept in the database, as ``doclane tokens list`` shows it: never the secret."""

    model_config = ConfigDict(frozen=True)

    name: str
    role: TokenRole
    tenant: str | None = None
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LiveToken:
    """What a request's token is, when a live stored token has its digest."""

    name: str
    role: TokenRole
    tenant: str | None


class TokenNameTaken(ValueError):
    """A token of this name exists (live or revoked): names are never reused."""


class ApiTokens(OnPool):
    """Stored API tokens through ``pool``."""

    def create(
        self,
        name: str,
        *,
        role: TokenRole,
        digest: bytes,
        created_by: str,
        tenant: str | None = None,
        expires_at: datetime | None = None,
    ) -> StoredToken:
        params = {
            "name": name,
            "role": role,
            "tenant": tenant,
            "digest": digest,
            "created_by": created_by,
            "expires_at": expires_at,
        }
        rows = self.pool.fetch_rows("making an API token", query("create_api_token"), params)
        if not rows:
            raise TokenNameTaken(f"a token named {name!r} exists (revoked names are not reused)")
        return StoredToken.model_validate(rows[0])

    def find(self, digest: bytes) -> LiveToken | None:
        """The live token with this digest (neither revoked nor expired), or None."""
        rows = self.pool.fetch_rows(
            "checking an API token", query("find_api_token"), {"digest": digest}
        )
        if not rows:
            return None
        row = rows[0]
        return LiveToken(str(row["name"]), row["role"], row["tenant"])

    def is_live(self, name: str) -> bool:
        """Whether ``name`` is a token neither revoked nor expired (a console session's)."""
        rows = self.pool.fetch_rows(
            "checking an API token", query("live_api_token"), {"name": name}
        )
        return bool(rows)

    def list_all(self, *, include_gone: bool = False) -> list[StoredToken]:
        """The live tokens by name; with ``include_gone``, the revoked and expired too."""
        rows = self.pool.fetch_rows(
            "listing API tokens", query("list_api_tokens"), {"all": include_gone}
        )
        return [StoredToken.model_validate(row) for row in rows]

    def revoke(self, name: str) -> StoredToken | None:
        """Revoke ``name`` now; None when no live token has that name."""
        rows = self.pool.fetch_rows(
            "revoking an API token", query("revoke_api_token"), {"name": name}
        )
        return StoredToken.model_validate(rows[0]) if rows else None


class AuditEntry(BaseModel):
    """One action: who (a token's name, or a JWT's subject with its issuer), when, from where,
    what (``action`` on ``target``), how it ended (``ok``, or an error code or HTTP status),
    and what else says it (a submission's job count). Never a secret."""

    model_config = ConfigDict(frozen=True)

    id: int | None = None
    at: datetime | None = None
    actor: str
    issuer: str | None = None
    address: str | None = None
    action: str
    target: str | None = None
    outcome: str
    detail: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class AuditFilter:
    since: datetime | None = None
    actor: str | None = None
    action: str | None = None
    before: int | None = None
    limit: int = 100


class AuditTrail(OnPool):
    """The audit trail through ``pool``: appended to, read newest first, pruned by age."""

    def record(self, entry: AuditEntry) -> None:
        params = entry.model_dump(exclude={"id", "at"})
        params["detail"] = Jsonb(entry.detail)
        with self.pool.connection("recording an audit entry") as conn:
            conn.execute(query("record_audit"), params)

    def list(self, filters: AuditFilter) -> list[AuditEntry]:
        params = {
            "since": filters.since,
            "actor": filters.actor,
            "action": filters.action,
            "before": filters.before,
            "limit": filters.limit,
        }
        rows = self.pool.fetch_rows("reading the audit trail", query("list_audit"), params)
        return [AuditEntry.model_validate(row) for row in rows]

    def prune(self, retention_s: float, *, idempotency_keep_s: float = IDEMPOTENCY_KEEP_S) -> int:
        """Delete the entries older than ``retention_s`` and the idempotency keys older than
        ``idempotency_keep_s``; how many entries went."""
        with self.pool.connection("pruning the audit trail") as conn, conn.transaction():
            conn.execute(query("allow_audit_prune"))
            gone = conn.execute(query("prune_audit"), {"retention_s": float(retention_s)}).rowcount
            conn.execute(query("prune_idempotency_keys"), {"keep_s": float(idempotency_keep_s)})
        return int(gone)


@dataclass(frozen=True, slots=True)
class KeyState:
    """What a submission's Idempotency-Key found: ``first`` (this request took it), else the
    first request's body digest and, once it answered, its status and answer."""

    first: bool
    body: bytes = b""
    status: int | None = None
    answer: Mapping[str, Any] | None = None


class IdempotencyKeys(OnPool):
    """Idempotency-Keys of submissions through ``pool``, per caller."""

    def take(self, caller: str, key: str, body: bytes, *, keep_s: float) -> KeyState:
        """Take ``key`` for ``caller`` (a key older than ``keep_s`` is taken anew), or read
        what the request that took it left."""
        params = {"caller": caller, "key": key, "body": body, "keep_s": float(keep_s)}
        with self.pool.connection("taking an idempotency key") as conn, conn.transaction():
            conn.execute(query("drop_stale_idempotency_key"), params)
            if conn.execute(query("take_idempotency_key"), params).fetchone() is not None:
                return KeyState(first=True)
            row = (
                conn.cursor(row_factory=dict_row)
                .execute(query("read_idempotency_key"), params)
                .fetchone()
            )
        if row is None:  # taken and given back between the two statements: take it again
            return self.take(caller, key, body, keep_s=keep_s)
        return KeyState(
            first=False, body=bytes(row["body"]), status=row["status"], answer=row["answer"]
        )

    def answer(self, caller: str, key: str, status: int, answer: Mapping[str, Any]) -> None:
        params = {"caller": caller, "key": key, "status": status, "answer": Jsonb(dict(answer))}
        with self.pool.connection("keeping a submission's answer") as conn:
            conn.execute(query("answer_idempotency_key"), params)

    def release(self, caller: str, key: str) -> None:
        """Give the key back (the submission failed before it answered)."""
        with self.pool.connection("releasing an idempotency key") as conn:
            conn.execute(query("release_idempotency_key"), {"caller": caller, "key": key})
