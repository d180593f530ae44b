"""Setting up the database itself: create it when missing, bring its schema up to date.

These are what ``doclane db migrate`` / ``doclane db status`` and the test fixtures call; they use
one short-lived connection each, never the store's pool.
"""

from __future__ import annotations

from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from errors import DatabaseUnavailable
from pipeline.store.connection import connect, schema_missing
from pipeline.store.migrations import (
    MIGRATION_LOCK_KEY,
    Migration,
    MigrationState,
    MigrationStatus,
    discover,
    migrate,
    status,
)
from pipeline.store.settings import StoreSettings

#: Databases to connect to when the target one does not exist yet.
_MAINTENANCE_DATABASES = ("postgres", "template1")


def database_name(settings: StoreSettings) -> str | None:
    name = conninfo_to_dict(settings.conninfo()).get("dbname")
    return str(name) if name else None


def ensure_database(settings: StoreSettings) -> bool:
    """Create the database named in ``settings`` if it does not exist; True if this call did.

    Processes doing this at once take turns (an advisory lock in the maintenance database;
    without it, concurrent CREATE DATABASE can fail on the catalog's unique index), and a loser
    that still collides takes the existing database for what it wanted.
    """
    name = database_name(settings)
    if name is None or name in _MAINTENANCE_DATABASES:
        return False
    last_error: DatabaseUnavailable | None = None
    for maintenance in _MAINTENANCE_DATABASES:
        try:
            with connect(settings, dbname=maintenance) as conn:
                conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
                found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if found.fetchone():
                    return False
                try:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                except (pg_errors.DuplicateDatabase, pg_errors.UniqueViolation):
                    return False
                return True  # the session lock goes with the connection
        except DatabaseUnavailable as exc:  # that maintenance database may not be ours to use
            last_error = exc
    assert last_error is not None
    raise last_error


def apply_migrations(settings: StoreSettings) -> list[Migration]:
    """Apply pending migrations from ``settings.migrations_dir``; return those applied now."""
    migrations = discover(settings.migrations_dir)
    with connect(settings) as conn:
        return migrate(conn, migrations)


def migration_status(settings: StoreSettings) -> list[MigrationStatus]:
    migrations = discover(settings.migrations_dir)
    with connect(settings) as conn:
        return status(conn, migrations)


def require_migrated(settings: StoreSettings, action: str) -> None:
    """Raise E401 saying to run ``doclane db migrate`` when a migration of this doclane is not
    applied to the database: one never migrated, or migrated by an older doclane. A worker asks
    before it starts, since on such a database it would take messages for jobs it cannot read
    and say nothing useful. An unreachable database raises E401 from ``connect``."""
    pending = [
        f"{m.version}_{m.name}"
        for m in migration_status(settings)
        if m.state is MigrationState.PENDING
    ]
    if pending:
        raise schema_missing(
            action, f"{len(pending)} migration(s) not applied, from {pending[0]}", pending=pending
        )
