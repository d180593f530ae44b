"""``doclane worker | beat | reconcile``: an operator's commands for the fleet.

``worker`` runs a Celery worker (prefork, one MCP client per process) with beat embedded by
default, so one command on one host is a complete pipeline; a large fleet runs its workers with
``--no-beat`` and one ``doclane beat``. ``reconcile`` runs one reconciler pass by hand.
"""

from __future__ import annotations

import typer

from errors import DatabaseUnavailable
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.store.database import require_migrated

from .output import AS_JSON, echo_json, fail
from .settings import command_settings
from .store_access import open_store
from .wiring import celery_publisher, run_beat, run_worker

app = typer.Typer(add_completion=False)

_LOGLEVEL = typer.Option(None, "--loglevel", "-l", help="DEBUG, INFO, WARNING.")


@app.command()
def worker(
    queues: str | None = typer.Option(
        None,
        "--queues",
        "-Q",
        help="Comma-separated queues (default: doclane.small,doclane.medium,doclane.large "
        "and doclane.control).",
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", "-c", min=1, help="Worker processes (default: 2)."
    ),
    beat: bool | None = typer.Option(
        None,
        "--beat/--no-beat",
        help="Run the reconciler's clock in this worker (default: yes, $DOCLANE_WORKER_BEAT).",
    ),
    loglevel: str | None = _LOGLEVEL,
) -> None:
    """Run a worker until SIGTERM (warm shutdown: running jobs finish first)."""
    _refuse_unmigrated_database()
    chosen = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    code = run_worker(queues=chosen, concurrency=concurrency, beat=beat, loglevel=loglevel)
    raise typer.Exit(code)


def _refuse_unmigrated_database() -> None:
    """E401 and exit 1, as every command says it, on a database without doclane's schema (or
    with an older one). A database that cannot be reached is no reason not to start: the worker
    waits it out as it waits out an outage (E401, retried)."""
    try:
        require_migrated(command_settings().store, "starting a worker")
    except DatabaseUnavailable as exc:
        if isinstance(exc.detail, dict) and exc.detail.get("migrations") == "missing":
            fail(exc, as_json=False)


@app.command(name="beat")
def beat_command(
    loglevel: str | None = _LOGLEVEL,
) -> None:
    """Run beat alone: it sends a reconciler pass to the workers every interval."""
    run_beat(loglevel=loglevel)


@app.command()
def reconcile(as_json: bool = AS_JSON) -> None:
    """One reconciler pass now: requeue expired leases, ring the queues with claimable work and
    no bell, delete expired results and orphaned result objects."""
    tree = command_settings()
    with open_store(as_json) as store, celery_publisher() as publisher:
        report = reconcile_once(store, publisher, tree.reconcile, inbox_dir=tree.sources.inbox_dir)
    if as_json:
        echo_json({"ok": not report.publish_failures, **report.to_dict()})
    else:
        failures = len(report.publish_failures)
        typer.echo(
            f"requeued {len(report.requeued)} expired lease(s), failed {len(report.failed)} "
            f"on their last attempt, rang {sum(report.rung.values())} bell(s), "
            f"swept {len(report.swept)} leftover download(s), removed {len(report.uploads)} "
            f"upload(s) no job names, expired {len(report.expired)} "
            f"result(s), deleted {len(report.orphans)} orphaned result object(s)"
            + (f", {failures} publish failure(s)" if failures else "")
        )
    if report.publish_failures:
        raise typer.Exit(1)
