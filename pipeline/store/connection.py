"""Connections to PostgreSQL, and the one place psycopg's failures become catalog errors.

Everything above this module sees ``DatabaseUnavailable`` (E401, retryable) when the database
cannot be reached, whatever psycopg or the pool raised, with the original kept as ``__cause__``,
and ``InvalidArgument`` (E117) for a text value with a NUL byte, which PostgreSQL's text cannot
hold: whatever door it came through (a filter, a form, a JSON field), it is the caller's to fix,
never a server error. Other psycopg errors (a constraint or trigger refusing a write, a syntax
error) are bugs or refusals the caller must see as they are, so they pass through untouched.
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from errors import DatabaseUnavailable, InvalidArgument
from pipeline.store.settings import StoreSettings
from pipeline.support.secrets import MASK

logger = logging.getLogger("doclane.store.connection")

#: A non-empty text PostgreSQL can hold (no NUL byte), as a schema's pattern: a door that
#: documents its text fields says so with it; whatever else reaches the store is E117 here.
TEXT_PATTERN = r"^[^\x00]+$"
#: What a NUL byte in a text value is refused with: the server's, a binary parameter's
#: (character_not_in_repertoire) and a JSON string's ``\u0000`` (untranslatable_character).
_NUL_SQLSTATES = frozenset({"22021", "22P05"})
#: psycopg's own refusal of a text parameter, before anything is sent (it has no SQLSTATE).
_NUL_MESSAGE = "cannot contain NUL (0x00) bytes"


@contextmanager
def database_errors(action: str) -> Iterator[None]:
    """Translate "the database is unreachable" (OperationalError and the pool's timeouts, which
    subclass it) into E401, and a NUL byte in a text value into E117, for the duration of
    ``action``."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(
            f"{action}: {type(exc).__name__}: {exc}".strip(),
            detail={"sqlstate": exc.sqlstate} if exc.sqlstate else None,
        ) from exc
    except psycopg.DataError as exc:
        if exc.sqlstate not in _NUL_SQLSTATES and _NUL_MESSAGE not in str(exc):
            raise
        raise InvalidArgument(
            f"{action}: a text value cannot contain a NUL byte (0x00); PostgreSQL's text holds "
            "none, so no name, filter or field has one",
            detail={"sqlstate": exc.sqlstate} if exc.sqlstate else None,
        ) from exc


@contextmanager
def missing_schema_errors(action: str) -> Iterator[None]:
    """Translate "doclane's schema is missing, or older than this code" (no such table or
    function) into E401 saying to run ``doclane db migrate``: for a person at a command line
    it is a usual mistake of a fresh install, not a bug."""
    try:
        yield
    except (pg_errors.UndefinedTable, pg_errors.UndefinedFunction) as exc:
        raise schema_missing(action, exc.diag.message_primary or "", sqlstate=exc.sqlstate) from exc


def schema_missing(action: str, why: str, **detail: Any) -> DatabaseUnavailable:
    """E401 for a database without doclane's schema or with an older one, saying to run
    ``doclane db migrate``; its detail says ``"migrations": "missing"``."""
    return DatabaseUnavailable(
        f"{action}: the database has no doclane schema or an old one ({why}); "
        "run `doclane db migrate`",
        detail={**detail, "migrations": "missing"},
    )


def connection_kwargs(settings: StoreSettings) -> dict[str, Any]:
    """Per-connection parameters shared by the pool and the one-off connections."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": settings.connect_timeout_s,
        "application_name": settings.application_name,
    }
    kwargs.update(tcp_deadline(settings.database_tcp_timeout_s))
    if settings.statement_timeout_s:
        kwargs["options"] = f"-c statement_timeout={int(settings.statement_timeout_s * 1000)}"
    return kwargs


def tcp_deadline(seconds: float) -> dict[str, int]:
    """libpq's parameters that bound a silent link: ``tcp_user_timeout`` ends a connection whose
    bytes go unacknowledged that long, and keepalives probe an idle one (waiting for a reply
    that a lost link will never bring) so the same limit finds it dead too. Empty for 0."""
    if seconds <= 0:
        return {}
    whole = max(1, int(seconds))
    return {
        "tcp_user_timeout": int(seconds * 1000),
        "keepalives": 1,
        "keepalives_idle": max(1, whole // 4),
        "keepalives_interval": max(1, whole // 8),
        "keepalives_count": 4,
    }


def looks_alive(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection may be lent without asking the server (no round trip).

    Between two borrows nothing is in flight, so an idle connection's socket has nothing to
    read unless the server spoke on its own: almost always to say goodbye (a shutdown or a
    terminated backend sends FATAL and closes; a crash closes the socket). A readable socket, or
    one psycopg already knows is closed, is suspect and gets the real check; a quiet one is lent
    as it is. Asking the server on every borrow doubled a worker's database round trips.
    """
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


class RestartAwareCheck:
    """The pool's check on borrow, which sweeps every idle connection once it meets a dead one.

    One dead connection almost always means PostgreSQL restarted and every idle connection died
    with it. Left alone, the borrower would meet them one after another, and psycopg_pool backs off
    0, 1, 2, 4 s between failed checks: four dead connections cost 7 s of a 10 s pool timeout, and
    a slower machine's first call after a restart fails with E401. ``ConnectionPool.check()``
    throws every dead idle connection away at once and starts their replacements, so the borrower
    waits only for one fresh connection.
    """

    def __init__(self) -> None:
        self.pool: ConnectionPool | None = None
        self._sweeping = threading.Lock()

    def __call__(self, conn: psycopg.Connection[Any]) -> None:
        if looks_alive(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            self._sweep()
            raise

    def _sweep(self) -> None:
        pool = self.pool
        if pool is None or not self._sweeping.acquire(blocking=False):
            return  # another thread is sweeping: its result is ours too
        try:
            lost_before = pool.get_stats().get("connections_lost", 0)
            pool.check()
            more_dead = pool.get_stats().get("connections_lost", 0) - lost_before
        except Exception:  # a sweep is an optimisation; the borrow loop still copes without it
            logger.exception("could not sweep the PostgreSQL pool after a dead connection")
            return
        finally:
            self._sweeping.release()
        logger.warning(
            "a pooled PostgreSQL connection was dead (database restarted?); "
            "swept the pool: %d more idle connection(s) dead, replacements started",
            more_dead,
        )


def create_pool(settings: StoreSettings) -> ConnectionPool:
    """A pool that survives a database restart.

    Connections are autocommit (multi-statement units use ``conn.transaction()``, a real BEGIN)
    and checked on every borrow (``RestartAwareCheck``, which asks the server only when the
    socket says something happened: ``looks_alive``), so after a restart the dead ones are
    thrown away and replaced instead of failing the next call. Opening does not wait: a process
    may start while the database is down; its calls fail with E401 until it is back.
    """
    check = RestartAwareCheck()
    pool: ConnectionPool = ConnectionPool(
        settings.conninfo(),
        min_size=settings.pool_min_size,
        max_size=max(settings.pool_max_size, settings.pool_min_size),
        kwargs=connection_kwargs(settings),
        check=check,
        timeout=settings.pool_timeout_s,
        name="doclane-store",
        open=False,
    )
    check.pool = pool
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


def mask_conninfo(conninfo: str) -> str:
    """A PostgreSQL connection string (URL or ``key=value``) without its password, for messages
    and ``--json`` output. Here, not in :mod:`pipeline.support.secrets`, because parsing one is
    psycopg's: the masker imports no database driver."""
    try:
        params: dict[str, Any] = conninfo_to_dict(conninfo)
    except Exception:  # an unparseable string: show nothing of it rather than a secret
        return "<unparseable database url>"
    if "password" in params:
        params["password"] = MASK
    return make_conninfo("", **params)
