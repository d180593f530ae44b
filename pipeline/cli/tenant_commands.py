"""``doclane tenants set | list``: who shares the fleet, their weights, caps and quotas.

Kept in PostgreSQL (``tenants``), so every worker obeys a change at its next claim and every
submitter at its next chunk: ``--max-running 0`` pauses a tenant's conversions (its jobs wait,
nothing is lost) and raising it resumes them; ``--max-queued N`` refuses documents past N
queued jobs (E115); ``--weight W`` serves the tenant W times as often as a tenant of weight 1
when both have work. ``none`` clears a limit. ``list`` (or ``doclane tenants`` alone) shows
each tenant with its jobs now.
"""

from __future__ import annotations

import typer

from pipeline.access.audit import audited_cli
from pipeline.jobs.tenants import Tenant, check_tenant_name
from pipeline.queues import wake
from pipeline.store.store import JobStore
from pipeline.store.tenants import UNSET

from .output import AS_JSON, echo_json, render_tenants, shown_limit, usage_error
from .store_access import open_store
from .wiring import celery_publisher

app = typer.Typer(add_completion=False, help="Tenants: weights, running caps, queue quotas.")


@app.callback(invoke_without_command=True)
def _tenants(ctx: typer.Context, as_json: bool = AS_JSON) -> None:
    """Tenants: weights, running caps, queue quotas; alone, ``doclane tenants`` lists them."""
    if ctx.invoked_subcommand is None:
        list_tenants(as_json)


_LIMIT_HELP = "a number, or none for no limit"


@app.command("set")
def set_tenant(
    name: str = typer.Argument(..., help="The tenant (made if it does not exist)."),
    max_running: str | None = typer.Option(
        None,
        "--max-running",
        help=f"At most this many of its jobs running across the fleet ({_LIMIT_HELP}); "
        "0 pauses its conversions.",
    ),
    max_queued: str | None = typer.Option(
        None,
        "--max-queued",
        help=f"At most this many of its jobs queued; past it documents are refused, E115 "
        f"({_LIMIT_HELP}).",
    ),
    weight: int | None = typer.Option(
        None, "--weight", help="Its share against the other tenants with work (1 to 1000)."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """Make a tenant or change it: only the options given change."""
    try:
        check_tenant_name(name)
        running = _limit(max_running, "--max-running")
        queued = _limit(max_queued, "--max-queued")
    except ValueError as exc:
        usage_error(str(exc), as_json)
    with open_store(as_json) as store:
        asked = {"weight": weight, "max_running": max_running, "max_queued": max_queued}
        try:
            with audited_cli(store, "set_tenant", name, **asked):
                tenant = store.tenants.set(
                    name,
                    weight=UNSET if weight is None else weight,
                    max_running=running,
                    max_queued=queued,
                )
        except ValueError as exc:
            usage_error(str(exc), as_json)
        rung = _wake_queues(store)
    if as_json:
        echo_json({"ok": True, "tenant": tenant.model_dump(mode="json"), "rung": rung})
        return
    typer.echo(_tenant_line(tenant))
    if rung:
        typer.echo(f"rang {', '.join(rung)}: its queued jobs are claimed now")


@app.command("list")
def list_tenants(as_json: bool = AS_JSON) -> None:
    """Every tenant, its limits, and its jobs: queued and running now, finished in the last
    hour, and the rate over the last five minutes."""
    with open_store(as_json) as store:
        figures = store.tenants.figures()
    if as_json:
        echo_json({"ok": True, "tenants": [f.model_dump(mode="json") for f in figures]})
        return
    typer.echo(render_tenants(figures), nl=False)


def _wake_queues(store: JobStore) -> dict[str, int]:
    """Room may have opened (a cap raised, a pause ended, a weight changed): the queues with
    claimable work and no bell are rung now, rather than at the reconciler's next pass. The
    bells rung; a broker that cannot be reached is no reason to fail a change that is already
    committed: the reconciler rings then."""
    try:
        with celery_publisher() as publisher:
            rung, refused = wake(publisher, store.operations.claimable_queues())
    except Exception as exc:  # the broker's client raises many kinds; none undoes the change
        refused, rung = {"broker": str(exc)}, {}
    if refused:
        typer.echo(
            f"warning: could not ring now ({next(iter(refused.values()))}); "
            "the reconciler's next pass rings",
            err=True,
        )
    return rung


def _limit(text: str | None, option: str) -> int | None:
    """A limit option: not given (leave it), ``none`` (clear it), or a number of 0 or more."""
    if text is None:
        return UNSET  # type: ignore[no-any-return]  # the store's "leave it" marker
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{option} takes a number or none, not {text!r}") from None
    if value < 0:
        raise ValueError(f"{option} takes 0 or more, not {value}")
    return value


def _tenant_line(t: Tenant) -> str:
    state = "  (paused)" if t.paused else ""
    return (
        f"{t.name}: weight {t.weight}, max running {shown_limit(t.max_running)}, "
        f"max queued {shown_limit(t.max_queued)}{state}"
    )
