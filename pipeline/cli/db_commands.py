"""``doclane db``: create the database, migrate its schema, show where the schema stands."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import typer

from errors import MigrationRefused, PipelineError
from pipeline.store.connection import mask_conninfo
from pipeline.store.database import apply_migrations, ensure_database, migration_status
from pipeline.store.migrations import MigrationError, MigrationState, MigrationStatus
from pipeline.store.settings import StoreSettings

from .output import AS_JSON, echo_json, fail
from .settings import command_settings

app = typer.Typer(
    help="Create and migrate doclane's PostgreSQL database.",
    no_args_is_help=True,
    add_completion=False,
)

_DATABASE_URL = typer.Option(
    None, "--database-url", help="PostgreSQL URL (default: $DOCLANE_DATABASE_URL)."
)
_MIGRATIONS_DIR = typer.Option(
    None,
    "--migrations-dir",
    help="Folder of NNNN_name.sql files (default: $DOCLANE_MIGRATIONS_DIR or the repository's).",
)


@app.command()
def migrate(
    as_json: bool = AS_JSON,
    database_url: str | None = _DATABASE_URL,
    migrations_dir: Path | None = _MIGRATIONS_DIR,
) -> None:
    """Create the database if it does not exist and apply pending migrations, in order.

    Safe to run from several processes at once; refuses (exit 1) when an applied migration file
    has changed since.
    """
    settings = _settings(database_url, migrations_dir)
    try:
        created = ensure_database(settings)
        applied = apply_migrations(settings)
        current = migration_status(settings)
    except (PipelineError, MigrationError) as exc:
        _fail(exc, settings, as_json)
    if as_json:
        report = {
            "database": mask_conninfo(settings.conninfo()),
            "created_database": created,
            "applied": [f"{m.version}_{m.name}" for m in applied],
            "migrations": [_status_dict(s) for s in current],
        }
        echo_json(report)
        return
    if created:
        typer.echo(f"created database {mask_conninfo(settings.conninfo())}")
    for m in applied:
        typer.echo(f"applied {m.file_name}")
    typer.echo(f"up to date: {len(current)} migrations applied")


@app.command()
def status(
    as_json: bool = AS_JSON,
    database_url: str | None = _DATABASE_URL,
    migrations_dir: Path | None = _MIGRATIONS_DIR,
) -> None:
    """Show each migration as applied, pending, changed or unknown.

    Exit 0 when every migration is applied and unchanged, 1 otherwise.
    """
    settings = _settings(database_url, migrations_dir)
    try:
        current = migration_status(settings)
    except (PipelineError, MigrationError) as exc:
        _fail(exc, settings, as_json)
    up_to_date = all(s.state is MigrationState.APPLIED for s in current)
    if as_json:
        report = {
            "database": mask_conninfo(settings.conninfo()),
            "up_to_date": up_to_date,
            "migrations": [_status_dict(s) for s in current],
        }
        echo_json(report)
    else:
        for s in current:
            when = f"  {s.applied_at:%Y-%m-%d %H:%M:%S%z}" if s.applied_at else ""
            typer.echo(f"{s.state.value:8} {s.version}_{s.name}{when}")
    if not up_to_date:
        raise typer.Exit(1)


def _settings(database_url: str | None, migrations_dir: Path | None) -> StoreSettings:
    overrides: dict[str, Any] = {}
    if database_url:
        overrides["database_url"] = database_url
    if migrations_dir:
        overrides["migrations_dir"] = migrations_dir
    return command_settings(store=overrides).store


def _status_dict(s: MigrationStatus) -> dict[str, Any]:
    return {
        "version": s.version,
        "name": s.name,
        "state": s.state.value,
        "checksum": s.checksum,
        "applied_checksum": s.applied_checksum,
        "applied_at": s.applied_at.isoformat() if s.applied_at else None,
    }


def _fail(exc: PipelineError | MigrationError, settings: StoreSettings, as_json: bool) -> NoReturn:
    error = exc if isinstance(exc, PipelineError) else MigrationRefused(str(exc))
    fail(error, as_json, context={"database": mask_conninfo(settings.conninfo())})
