"""The pool lends a quiet connection without a round trip, and still never lends a dead one.

A backend ended by ``pg_terminate_backend`` dies as in a restart (FATAL, then the socket
closes), but only this test's connections are touched: the shared cluster keeps running.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pipeline.store.connection import create_pool, looks_alive
from pipeline.store.settings import StoreSettings
from tests.fixtures.waiting import wait_for


@pytest.fixture
def pool(store_settings: StoreSettings) -> Iterator[ConnectionPool]:
    settings = store_settings.model_copy(
        update={"pool_timeout_s": 30.0, "pool_min_size": 3, "pool_max_size": 3}
    )
    pool = create_pool(settings)
    pool.wait(timeout=30)
    yield pool
    pool.close()


def _backends(pool: ConnectionPool) -> list[int]:
    with ExitStack() as held:
        conns = [held.enter_context(pool.connection()) for _ in range(3)]
        return [conn.info.backend_pid for conn in conns]


def test_a_quiet_connection_is_lent_without_asking_the_server(
    store_settings: StoreSettings,
) -> None:
    settings = store_settings.model_copy(update={"pool_min_size": 1, "pool_max_size": 1})
    single = create_pool(settings)
    try:
        with pool_connection(single) as conn:
            pid = conn.info.backend_pid
            conn.execute("select 'the last statement'")
        with (
            pool_connection(single) as conn,
            psycopg.connect(store_settings.conninfo(), autocommit=True) as admin,
        ):
            assert conn.info.backend_pid == pid
            # A check on borrow would have sent an empty query, the session's last statement.
            last = admin.execute("select query from pg_stat_activity where pid = %s", [pid])
            assert last.fetchone() == ("select 'the last statement'",)
    finally:
        single.close()


def pool_connection(pool: ConnectionPool) -> Any:
    return pool.connection(timeout=30)


def test_terminated_backends_are_never_lent_and_are_swept_at_once(
    pool: ConnectionPool, store_settings: StoreSettings, caplog: pytest.LogCaptureFixture
) -> None:
    pids = _backends(pool)
    assert len(set(pids)) == 3
    with psycopg.connect(store_settings.conninfo(), autocommit=True) as admin:
        admin.execute("select pg_terminate_backend(pid) from unnest(%s::int[]) pid", [pids])
        wait_for(
            lambda: (
                not admin.execute(
                    "select 1 from pg_stat_activity where pid = any(%s::int[])", [pids]
                ).fetchone()
            ),
            timeout=30,
            message="the terminated backends to exit",
        )
    with caplog.at_level(logging.WARNING, logger="doclane.store.connection"):
        with pool.connection() as conn:
            assert conn.execute("select 1").fetchone() == (1,)
            assert conn.info.backend_pid not in pids
        sweeps = [r.getMessage() for r in caplog.records if "swept the pool" in r.getMessage()]
    assert sweeps == [
        "a pooled PostgreSQL connection was dead (database restarted?); "
        "swept the pool: 2 more idle connection(s) dead, replacements started"
    ]


def test_a_terminated_connection_does_not_look_alive(store_settings: StoreSettings) -> None:
    with (
        psycopg.connect(store_settings.conninfo(), autocommit=True) as conn,
        psycopg.connect(store_settings.conninfo(), autocommit=True) as admin,
    ):
        assert looks_alive(conn)
        pid = conn.info.backend_pid
        admin.execute("select pg_terminate_backend(%s)", [pid])
        wait_for(lambda: not looks_alive(conn), timeout=30, message="the socket to say so")
