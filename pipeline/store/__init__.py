"""The job store: PostgreSQL as doclane's source of truth (psycopg 3 + psycopg_pool).

``JobStore`` is what a process opens: one ``StorePool`` and the parts that stand on it, one for
each kind of caller (``Attempts``, ``Submissions``, ``Operations``, ``Reads``, ``AdminStore``).
``ensure_database`` / ``apply_migrations`` / ``migration_status`` set the database up (the
numbered SQL files of ``migrations/``). The state machine itself lives in the database; its
refusals are :mod:`pipeline.store.refusals`' exceptions. Names are imported on first use
(:mod:`pipeline.support.lazy`): ``doclane stats`` reads through the admin views' parts and
loads neither the worker's claims nor the submissions' writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.store.admin import AdminStore as AdminStore
    from pipeline.store.admin import JobFilter as JobFilter
    from pipeline.store.attempts import Attempts as Attempts
    from pipeline.store.attempts import ClaimFound as ClaimFound
    from pipeline.store.attempts import QueueClaim as QueueClaim
    from pipeline.store.connection import mask_conninfo as mask_conninfo
    from pipeline.store.database import apply_migrations as apply_migrations
    from pipeline.store.database import ensure_database as ensure_database
    from pipeline.store.database import migration_status as migration_status
    from pipeline.store.database import require_migrated as require_migrated
    from pipeline.store.migrations import Migration as Migration
    from pipeline.store.migrations import MigrationError as MigrationError
    from pipeline.store.migrations import MigrationState as MigrationState
    from pipeline.store.migrations import MigrationStatus as MigrationStatus
    from pipeline.store.operations import Operations as Operations
    from pipeline.store.pool import StorePool as StorePool
    from pipeline.store.reads import Reads as Reads
    from pipeline.store.refusals import ResultFormatsRefused as ResultFormatsRefused
    from pipeline.store.rows import AttemptResults as AttemptResults
    from pipeline.store.rows import CallEvent as CallEvent
    from pipeline.store.scoped import TenantView as TenantView
    from pipeline.store.settings import StoreSettings as StoreSettings
    from pipeline.store.store import JobStore as JobStore
    from pipeline.store.submissions import Submissions as Submissions
    from pipeline.store.tenants import Tenants as Tenants

if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
