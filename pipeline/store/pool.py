"""The one owner of a process's PostgreSQL connections, which every part of the store stands on.

One ``StorePool`` per process (it owns a connection pool; create it after a fork, e.g. in
Celery's ``worker_process_init``, and ``close()`` it at shutdown); safe to use from many threads.
The store's parts (:class:`~pipeline.store.attempts.Attempts`,
:class:`~pipeline.store.submissions.Submissions`, :class:`~pipeline.store.operations.Operations`,
:class:`~pipeline.store.reads.Reads`, :class:`~pipeline.store.admin.AdminStore`, the webhook
outbox) hold no connection of their own: each borrows one from here for each short transaction.

A database that cannot be reached raises :class:`errors.DatabaseUnavailable` (E401, retryable)
from every borrow; the pool replaces dead connections once the database is back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypedDict

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from pipeline.jobs.model import Job
from pipeline.store.connection import create_pool, database_errors, missing_schema_errors
from pipeline.store.queries import query
from pipeline.store.settings import StoreSettings
from pipeline.support.tracing import store_span

if TYPE_CHECKING:  # imported where one is built: results in PostgreSQL need no object store
    from pipeline.store.result_objects import ObjectResults


class PoolOptions(TypedDict, total=False):
    """What a :class:`StorePool` is opened with besides its settings (see its ``__init__``)."""

    explain_missing_schema: bool
    result_objects: ObjectResults | None


class StorePool:
    """A process's connections to the store's database, and the object half of its results."""

    def __init__(
        self,
        settings: StoreSettings | None = None,
        *,
        explain_missing_schema: bool = False,
        result_objects: ObjectResults | None = None,
    ) -> None:
        """With ``explain_missing_schema``, a call that meets no doclane table or function
        raises E401 saying to run ``doclane db migrate`` (what the commands people type want)
        instead of psycopg's own error. ``result_objects`` is where results go when
        ``DOCLANE_RESULT_STORE`` names an object store (by default built from it on first use)."""
        self.settings = settings or StoreSettings.from_environment()
        self._pool: ConnectionPool = create_pool(self.settings)
        self._explain_missing_schema = explain_missing_schema
        self._result_objects = result_objects

    @property
    def result_objects(self) -> ObjectResults | None:
        """The object half of the result store, or None when results live in PostgreSQL."""
        if self._result_objects is None and self.settings.result_store != "postgres":
            from pipeline.store.result_objects import ObjectResults

            self._result_objects = ObjectResults(self.settings.result_store)
        return self._result_objects

    def objects_for(self, uri: str) -> ObjectResults:
        """The result store's objects; one under another root (kept before the setting
        changed) is still read, through a store built for it."""
        from pipeline.store.result_objects import ObjectResults

        return self.result_objects or ObjectResults(uri)

    def close(self) -> None:
        self._pool.close()

    def ping(self) -> None:
        """Raise E401 unless the database answers."""
        with self.connection("pinging the database") as conn:
            conn.execute("SELECT 1")

    @contextmanager
    def connection(self, action: str) -> Iterator[psycopg.Connection]:
        """A pooled connection (autocommit) for ``action``, its failures as catalog errors."""
        schema = missing_schema_errors(action) if self._explain_missing_schema else nullcontext()
        with store_span(action), schema, database_errors(action), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def progress(self, action: str) -> Iterator[psycopg.Connection]:
        """One transaction of progress writes, sent in one round trip (pipeline mode) and
        committed without waiting for the WAL flush (``synchronous_commit = off``).

        A synchronous commit waits for an fsync: 2-3 ms on this project's machines, more than
        all else a job's progress writes cost. What goes through here (stages, the trail's
        calls and notes, lease renewals) is a progress report: a database crash may lose its
        last fraction of a second, which leaves no inconsistency (the attempt's fencing token
        comes from the claim, and the results from the attempt's finish, both committed
        synchronously, and each synchronous commit flushes every earlier one with it).
        """
        with self.connection(action) as conn, conn.pipeline(), conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    @contextmanager
    def because(self, action: str, reason: str | None) -> Iterator[psycopg.Connection]:
        """One transaction whose changes of state carry ``reason`` into the job's trail (the
        event trigger of migration 0004 reads it; it is gone at commit). None: no reason."""
        with self.connection(action) as conn, conn.transaction():
            if reason:
                conn.execute(query("set_reason"), {"reason": reason})
            yield conn

    def update(self, action: str, sql: str, params: Mapping[str, Any]) -> bool:
        """Run one guarded write; whether it matched exactly one row."""
        with self.connection(action) as conn:
            return conn.execute(sql, params).rowcount == 1

    def fetch_rows(self, action: str, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        with self.connection(action) as conn:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

    def fetch_job(self, action: str, sql: str, params: Mapping[str, Any]) -> Job | None:
        with self.connection(action) as conn:
            row = conn.cursor(row_factory=dict_row).execute(sql, params).fetchone()
        return Job.model_validate(row) if row else None


class OnPool:
    """A part of the store for one kind of caller (attempts, reads, tenants, ...): each stands
    on the process's one pool, and is built from it alone."""

    def __init__(self, pool: StorePool) -> None:
        self.pool = pool
