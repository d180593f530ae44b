"""Connections to PostgreSQL, and the one place psycopg's failures become catalog errors.

Everything above this module sees ``DatabaseUnavailable`` (E401, retryable) when the database
cannot be reached, whatever psycopg or the pool raised, with the original kept as ``__cause__``.
Other psycopg errors (a constraint or trigger refusing a write, a syntax error) are bugs or
refusals the caller must see as they are, so they pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from errors import DatabaseUnavailable
from pipeline.store.settings import StoreSettings


@contextmanager
def database_errors(action: str) -> Iterator[None]:
    """Translate "the database is unreachable" (OperationalError and the pool's timeouts, which
    subclass it) into E401 for the duration of ``action``."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(
            f"{action}: {type(exc).__name__}: {exc}".strip(),
            detail={"sqlstate": exc.sqlstate} if exc.sqlstate else None,
        ) from exc


def connection_kwargs(settings: StoreSettings) -> dict[str, Any]:
    """Per-connection parameters shared by the pool and the one-off connections."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": settings.connect_timeout_s,
        "application_name": settings.application_name,
    }
    if settings.statement_timeout_s:
        kwargs["options"] = f"-c statement_timeout={int(settings.statement_timeout_s * 1000)}"
    return kwargs


def create_pool(settings: StoreSettings) -> ConnectionPool:
    """A pool that survives a database restart.

    Connections are autocommit (multi-statement units use ``conn.transaction()``, a real BEGIN)
    and checked on every borrow, so after a restart the dead ones are thrown away and replaced
    instead of failing the next call. Opening does not wait: a process may start while the
    database is down; its calls fail with E401 until it is back.
    """
    pool: ConnectionPool = ConnectionPool(
        settings.conninfo(),
        min_size=settings.pool_min_size,
        max_size=max(settings.pool_max_size, settings.pool_min_size),
        kwargs=connection_kwargs(settings),
        check=ConnectionPool.check_connection,
        timeout=settings.pool_timeout_s,
        name="doclane-store",
        open=False,
    )
    pool.open(wait=False)
    return pool


@contextmanager
def connect(settings: StoreSettings, *, dbname: str | None = None) -> Iterator[psycopg.Connection]:
    """One connection outside the pool (migrations, admin commands), closed on exit."""
    extra: dict[str, Any] = connection_kwargs(settings)
    extra.pop("options", None)  # migrations may legitimately run longer than a statement limit
    if dbname is not None:
        extra["dbname"] = dbname
    with (
        database_errors("connecting to the database"),
        psycopg.connect(settings.conninfo(), **extra) as conn,
    ):
        yield conn
