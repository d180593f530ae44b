"""``doclane webhooks``: the completion webhooks' outbox, and re-sending what did not arrive.

Without options it lists the deliveries still pending (with the failed ones: tried and failed,
still being retried, their last answer or error shown); ``--dead`` lists those that gave up.
``--retry`` makes the listed ones due now, with a new run of tries: the workers' next delivery
pass (``DOCLANE_WEBHOOK_POLL_S``) sends them. Receivers' URLs are shown masked (a token in a URL is
a secret).
"""

from __future__ import annotations

import typer

from pipeline.access.audit import audited_cli
from pipeline.store.outbox import DeliveryRow, DeliveryState, WebhookOutbox
from pipeline.support.secrets import process_masker

from .output import AS_JSON, echo_json
from .store_access import open_store

app = typer.Typer(add_completion=False)


@app.command()
def webhooks(
    dead: bool = typer.Option(False, "--dead", help="The dead deliveries (they gave up)."),
    retry: bool = typer.Option(
        False, "--retry", help="Send them again: due now, with a new day of tries."
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=10000, help="List at most this many."),
    as_json: bool = AS_JSON,
) -> None:
    """List completion webhook deliveries that have not arrived; --retry sends them again."""
    state = DeliveryState.DEAD if dead else DeliveryState.PENDING
    with open_store(as_json) as store:
        outbox = WebhookOutbox(store.pool)
        revived = []
        if retry:
            with audited_cli(store, "resend_webhooks", state.value) as trail:
                revived = outbox.revive(state)
                trail["deliveries"] = len(revived)
        rows = outbox.listing(DeliveryState.PENDING if retry else state, limit=limit)
        counts = outbox.counts()
    if as_json:
        out = {
            "ok": True,
            "counts": {"pending": counts.pending, "failed": counts.failed, "dead": counts.dead},
            "deliveries": [_as_dict(row) for row in rows],
            "retried": [str(i) for i in revived],
        }
        echo_json(out)
        return
    for row in rows:
        typer.echo(_line(row))
    if retry:
        typer.echo(f"{len(revived)} delivery(ies) due again now", err=True)
    typer.echo(f"pending {counts.pending}, failed {counts.failed}, dead {counts.dead}", err=True)


def _as_dict(row: DeliveryRow) -> dict[str, object]:
    return {
        "id": str(row.id),
        "job_id": str(row.job_id),
        "url": process_masker().text(row.url),
        "state": row.state.value,
        "attempts": row.attempts,
        "next_attempt_at": row.next_attempt_at.isoformat(),
        "created_at": row.created_at.isoformat(),
        "last_status": row.last_status,
        "last_error": row.last_error,
    }


def _line(row: DeliveryRow) -> str:
    why = f"{row.last_status or ''} {row.last_error or 'not tried yet'}".strip()
    when = row.next_attempt_at.isoformat(timespec="seconds")
    shown = process_masker().text(row.url)
    return (
        f"{row.id}  job {row.job_id}  {row.state.value} x{row.attempts} next {when}  {shown}  {why}"
    )
