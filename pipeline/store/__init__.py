"""The job store: PostgreSQL as doclane's source of truth (psycopg 3 + psycopg_pool).

``JobStore`` is what workers, the reconciler and the CLI write and read jobs through;
``ensure_database`` / ``apply_migrations`` / ``migration_status`` set the database up (the
numbered SQL files of ``migrations/``). The state machine itself lives in the database.
"""

from __future__ import annotations

from pipeline.store.admin import AdminStore, JobFilter
from pipeline.store.connection import mask_conninfo
from pipeline.store.database import apply_migrations, ensure_database, migration_status
from pipeline.store.migrations import Migration, MigrationError, MigrationState, MigrationStatus
from pipeline.store.rows import AttemptResults, CallEvent
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore

__all__ = [
    "AdminStore",
    "AttemptResults",
    "CallEvent",
    "JobFilter",
    "JobStore",
    "Migration",
    "MigrationError",
    "MigrationState",
    "MigrationStatus",
    "StoreSettings",
    "apply_migrations",
    "ensure_database",
    "mask_conninfo",
    "migration_status",
]
