"""The job store: PostgreSQL as doclane's source of truth (psycopg 3 + psycopg_pool).

``JobStore`` is what a process opens: one ``StorePool`` and the parts that stand on it, one for
each kind of caller (``Attempts``, ``Submissions``, ``Operations``, ``Reads``, ``AdminStore``).
``ensure_database`` / ``apply_migrations`` / ``migration_status`` set the database up (the
numbered SQL files of ``migrations/``). The state machine itself lives in the database; its
refusals are :mod:`pipeline.store.refusals`' exceptions.
"""

from __future__ import annotations

from pipeline.store.admin import AdminStore, JobFilter
from pipeline.store.attempts import Attempts, ClaimFound, QueueClaim
from pipeline.store.connection import mask_conninfo
from pipeline.store.database import (
    apply_migrations,
    ensure_database,
    migration_status,
    require_migrated,
)
from pipeline.store.migrations import Migration, MigrationError, MigrationState, MigrationStatus
from pipeline.store.operations import Operations
from pipeline.store.pool import StorePool
from pipeline.store.reads import Reads
from pipeline.store.refusals import FormatsMismatch
from pipeline.store.rows import AttemptResults, CallEvent
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from pipeline.store.submissions import Submissions
from pipeline.store.tenants import Tenants

__all__ = [
    "AdminStore",
    "AttemptResults",
    "Attempts",
    "CallEvent",
    "ClaimFound",
    "FormatsMismatch",
    "JobFilter",
    "JobStore",
    "Migration",
    "MigrationError",
    "MigrationState",
    "MigrationStatus",
    "Operations",
    "QueueClaim",
    "Reads",
    "StorePool",
    "StoreSettings",
    "Submissions",
    "Tenants",
    "apply_migrations",
    "ensure_database",
    "mask_conninfo",
    "migration_status",
    "require_migrated",
]
