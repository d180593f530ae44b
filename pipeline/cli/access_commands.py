"""``doclane tokens create | list | revoke`` and ``doclane audit``: access kept in PostgreSQL.

A token made here is printed once (``--json``: the field ``token``) and only its SHA-256 digest
is stored; every API process looks a request's token up in the database, so ``revoke`` is
obeyed at the next request everywhere, no restart. ``doclane audit`` reads the trail of every
action that changed something (the API's, the console's and these commands'), newest first.
"""

from __future__ import annotations

import typer

from errors import InvalidArgument
from pipeline.access.audit import audited_cli, cli_actor
from pipeline.access.tokens import issue_token
from pipeline.admin.jobs import parse_since
from pipeline.settings.api import ROLES
from pipeline.store.access import AuditEntry, AuditFilter, StoredToken

from .output import AS_JSON, echo_json, fail, usage_error
from .settings import command_settings
from .store_access import open_store

tokens_app = typer.Typer(add_completion=False, help="API tokens kept in PostgreSQL.")
app = typer.Typer(add_completion=False)
app.add_typer(tokens_app, name="tokens")


@tokens_app.command("create")
def create(
    name: str = typer.Argument(..., help="What logs and the audit trail call it."),
    role: str = typer.Option(..., "--role", help="read, submit or admin."),
    tenant: str | None = typer.Option(None, "--tenant", help="It submits and sees as it only."),
    expires: str | None = typer.Option(
        None, "--expires", help="How long it is valid: 30m, 12h, 90d, 2w (default: never)."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """Make a token and print its secret, once: only its digest is kept."""
    if role not in ROLES:
        usage_error(f"--role is read, submit or admin, not {role!r}", as_json)
    api = command_settings().api
    with open_store(as_json) as store:
        try:
            with audited_cli(store, "create_token", name, role=role, tenant=tenant):
                issued = issue_token(
                    store,
                    api,
                    name,
                    role=role,
                    tenant=tenant,
                    expires=expires,
                    created_by=cli_actor(),
                )
        except ValueError as exc:
            usage_error(str(exc), as_json)
    if as_json:
        echo_json({"ok": True, "token": issued.secret, **issued.token.model_dump(mode="json")})
        return
    typer.echo(issued.secret)
    typer.echo(
        f"token {name!r} ({_describe(issued.token)}): shown this once; keep it now", err=True
    )


@tokens_app.command("list")
def list_tokens(
    include_revoked: bool = typer.Option(
        False, "--all", help="The revoked and expired tokens too."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """The stored tokens: name, role, tenant, created, expires, last used (never a secret)."""
    with open_store(as_json) as store:
        found = store.tokens.list_all(include_gone=include_revoked)
    if as_json:
        echo_json({"ok": True, "tokens": [t.model_dump(mode="json") for t in found]})
        return
    if not found:
        typer.echo("no stored tokens (doclane tokens create NAME --role R makes one)")
        return
    typer.echo(f"{'NAME':<24} {'ROLE':<7} {'TENANT':<16} {'CREATED':<17} {'EXPIRES':<17} LAST USED")
    for t in found:
        gone = "  (revoked)" if t.revoked_at else ""
        typer.echo(
            f"{t.name:<24} {t.role:<7} {t.tenant or '-':<16} {_when(t.created_at):<17} "
            f"{_when(t.expires_at, 'never'):<17} {_when(t.last_used_at, 'never')}{gone}"
        )


@tokens_app.command("revoke")
def revoke(name: str = typer.Argument(...), as_json: bool = AS_JSON) -> None:
    """Revoke a token now: every API process refuses it at its next request."""
    with open_store(as_json) as store, audited_cli(store, "revoke_token", name) as detail:
        revoked = store.tokens.revoke(name)
        detail["found"] = revoked is not None
    if revoked is None:
        fail(
            InvalidArgument(f"no live stored token is named {name!r} (doclane tokens list)"),
            as_json,
        )
    if as_json:
        echo_json({"ok": True, **revoked.model_dump(mode="json")})
        return
    typer.echo(f"revoked {name!r} ({_describe(revoked)})")


@app.command("audit")
def audit(
    since: str | None = typer.Option(None, "--since", help="30m, 1h, 2d, 1w, or an ISO time."),
    actor: str | None = typer.Option(None, "--actor", help="A token's name, a JWT's subject."),
    action: str | None = typer.Option(
        None, "--action", help="submit, cancel, retry, retry_failed, set_tenant, ..."
    ),
    limit: int = typer.Option(100, "--limit", min=1, max=10000),
    as_json: bool = AS_JSON,
) -> None:
    """The audit trail, newest first: who did what, when, from where, and how it ended."""
    try:
        moment = parse_since(since) if since else None
    except ValueError as exc:
        usage_error(str(exc), as_json)
    with open_store(as_json) as store:
        found = store.audit.list(AuditFilter(since=moment, actor=actor, action=action, limit=limit))
    if as_json:
        echo_json({"ok": True, "entries": [e.model_dump(mode="json") for e in found]})
        return
    for e in found:
        typer.echo(_entry_line(e))


def _entry_line(e: AuditEntry) -> str:
    who = f"{e.actor} ({e.issuer})" if e.issuer else e.actor
    where = f" from {e.address}" if e.address else ""
    target = f" {e.target}" if e.target else ""
    detail = " ".join(f"{k}={v}" for k, v in sorted(e.detail.items()))
    return f"{_when(e.at)}  {who}{where}: {e.action}{target} -> {e.outcome}  {detail}".rstrip()


def _describe(t: StoredToken) -> str:
    tenant = f", tenant {t.tenant}" if t.tenant else ""
    return f"role {t.role}{tenant}, expires {_when(t.expires_at, 'never')}"


def _when(moment: object, none: str = "-") -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if hasattr(moment, "strftime") else none
