"""The schema migration runner: numbered plain-SQL files, applied in order, each recorded with the
sha256 of the SQL that ran (its text with universal newlines: CRLF and LF checkouts agree).

Why not a library: yoyo-migrations (the plain-SQL candidate) hashes a migration's *id*, not its
content, so it cannot refuse an applied file that was edited, and it serialises runners with a
lock table rather than an advisory lock. What doclane needs fits in this module:

- ``migrations/NNNN_name.sql``, applied in version order, each inside one transaction together
  with its row in ``schema_migrations`` (so a failed file leaves no trace and is retried);
- a session advisory lock around the whole run, so processes starting at once take turns and
  the later ones find nothing left to do;
- a refusal, naming the file, when an applied file's checksum changed or the database knows a
  migration this checkout does not (an older doclane against a newer schema).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import time
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path

import psycopg

#: Arbitrary but fixed: "doclane" in ASCII. Every runner of every version takes this same lock.
MIGRATION_LOCK_KEY = 0x646F636C616E65

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text        PRIMARY KEY,
    name        text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    duration_ms integer     NOT NULL
)"""


class MigrationError(RuntimeError):
    """The migrations on disk and in the database disagree; nothing was applied."""


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    path: Path
    checksum: str

    @property
    def file_name(self) -> str:
        return self.path.name

    def sql(self) -> str:
        return _read_sql(self.path)


class MigrationState(StrEnum):
    APPLIED = "applied"
    PENDING = "pending"
    #: applied, but the file's bytes differ from what was applied
    CHANGED = "changed"
    #: applied in the database, no such file here
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class MigrationStatus:
    version: str
    name: str
    state: MigrationState
    checksum: str | None
    applied_checksum: str | None = None
    applied_at: datetime | None = None


def packaged_migrations_dir() -> Path:
    """The folder of the ``migrations`` package, whose .sql files ship with doclane (package
    data): found through the import system, so a regular install finds its own copy. Nothing is
    imported; where the package is missing (an install made before it existed) only migrating
    fails, naming the cure, not every process that reads the store's settings."""
    spec = importlib.util.find_spec("migrations")
    if spec is None or spec.origin is None:
        return Path("(no migrations package: reinstall doclane)")
    return Path(spec.origin).parent


def discover(folder: Path) -> list[Migration]:
    """The migration files of ``folder``, in version order. A ``.sql`` file that is not named
    ``NNNN_name.sql``, or two files with one version, is an error rather than silently skipped."""
    if not folder.is_dir():
        raise MigrationError(f"migrations folder not found: {folder} (set DOCLANE_MIGRATIONS_DIR)")
    found: dict[str, Migration] = {}
    for path in sorted(folder.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: migration files are named NNNN_name.sql")
        version, name = match.groups()
        if version in found:
            raise MigrationError(
                f"{path.name}: version {version} is also {found[version].file_name}"
            )
        found[version] = Migration(version, name, path, _checksum(_read_sql(path)))
    return [found[v] for v in sorted(found)]


def status(conn: psycopg.Connection, migrations: list[Migration]) -> list[MigrationStatus]:
    """Every migration known to the files or the database, with its state; reads only."""
    applied = _applied(conn)
    rows = []
    for m in migrations:
        record = applied.pop(m.version, None)
        if record is None:
            rows.append(MigrationStatus(m.version, m.name, MigrationState.PENDING, m.checksum))
            continue
        state = MigrationState.APPLIED if record[1] == m.checksum else MigrationState.CHANGED
        rows.append(MigrationStatus(m.version, m.name, state, m.checksum, record[1], record[2]))
    for version, (name, checksum, applied_at) in sorted(applied.items()):
        rows.append(
            MigrationStatus(version, name, MigrationState.UNKNOWN, None, checksum, applied_at)
        )
    return rows


def migrate(conn: psycopg.Connection, migrations: list[Migration]) -> list[Migration]:
    """Apply what is pending, in order; return what this call applied (empty when up to date).

    ``conn`` must be in autocommit mode: each file gets its own transaction, and the advisory
    lock is held by the session across all of them.
    """
    if not conn.autocommit:
        raise ValueError("migrate() needs an autocommit connection")
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        conn.execute(_CREATE_LEDGER)
        current = status(conn, migrations)
        _refuse_disagreements(current)
        pending = {s.version for s in current if s.state is MigrationState.PENDING}
        done = []
        for m in migrations:
            if m.version in pending:
                _apply(conn, m)
                done.append(m)
        return done
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


def _apply(conn: psycopg.Connection, migration: Migration) -> None:
    sql = migration.sql()
    if _checksum(sql) != migration.checksum:
        raise MigrationError(f"{migration.file_name} changed while migrating; run again")
    started = time.monotonic()
    try:
        with conn.transaction():
            conn.execute(sql.encode("utf-8"))
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum, duration_ms)"
                " VALUES (%s, %s, %s, %s)",
                (
                    migration.version,
                    migration.name,
                    migration.checksum,
                    int((time.monotonic() - started) * 1000),
                ),
            )
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        raise MigrationError(f"{migration.file_name} failed: {exc}") from exc


def _read_sql(path: Path) -> str:
    """The SQL as it runs: text with universal newlines, so a file checked out with CRLF line
    endings is the same migration as its LF original (and has the same checksum)."""
    return path.read_text(encoding="utf-8")


def _checksum(sql: str) -> str:
    """sha256 of exactly what runs (for a file with LF endings, the same as of its bytes)."""
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


def _refuse_disagreements(current: list[MigrationStatus]) -> None:
    for s in current:
        if s.state is MigrationState.CHANGED:
            raise MigrationError(
                f"{s.version}_{s.name}.sql was changed after it was applied "
                f"(applied sha256 {s.applied_checksum}, file sha256 {s.checksum}); "
                "restore the file and put the change in a new migration"
            )
        if s.state is MigrationState.UNKNOWN:
            raise MigrationError(
                f"the database has migration {s.version}_{s.name} that these files do not "
                "(is this an older doclane than the one that migrated it?)"
            )


def _applied(conn: psycopg.Connection) -> dict[str, tuple[str, str, datetime]]:
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return {}
    rows = conn.execute("SELECT version, name, checksum, applied_at FROM schema_migrations")
    return {version: (name, checksum, at) for version, name, checksum, at in rows}
