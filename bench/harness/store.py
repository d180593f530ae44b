"""A store bench's database: scratch, loaded with synthetic history, its queries EXPLAINed.

bench/store_admin_queries.py (the store's queries), bench/admin_queries.py (the same load,
through the admin views and the HTTP API) and bench/console_pages.py (the console's pages over
it) share the load (:func:`synthetic_history`), the options and the measure.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import ClientCursor, sql
from psycopg.conninfo import make_conninfo

LOAD_JOBS = """
INSERT INTO jobs (id, source_kind, source_uri, size_bytes, content_sha256, profile, options,
                  formats, queue, priority, state, stage, attempt, attempts_spent, max_attempts,
                  lease_owner, lease_expires_at, next_attempt_at, error_code, error_message,
                  created_at, started_at, finished_at, updated_at)
SELECT gen_random_uuid(), 'file', '/inbox/doc-' || i || '.docx', 1000 + (i %% 5000000),
       md5(i::text) || md5((i + 1)::text), 'docling-mcp', '{}'::jsonb, '{md}',
       (ARRAY['doclane.small', 'doclane.small', 'doclane.small', 'doclane.small',
              'doclane.small', 'doclane.small', 'doclane.small', 'doclane.medium',
              'doclane.medium', 'doclane.large'])[1 + i %% 10],
       0, s.state,
       CASE WHEN s.state = 'running' THEN 'converting' END,
       CASE WHEN s.state = 'queued' THEN 0 ELSE 1 END,
       CASE WHEN s.state = 'queued' THEN 0 ELSE 1 END,
       3,
       CASE WHEN s.state = 'running' THEN 'worker-' || (i %% 16) END,
       CASE WHEN s.state = 'running'
            THEN now() + make_interval(secs => (i %% 1200) - 600) END,
       CASE WHEN s.state = 'retrying' THEN t.created + interval '1 minute' END,
       CASE WHEN s.state IN ('failed', 'retrying')
            THEN (ARRAY['E302', 'E303', 'E306', 'E307', 'E101', 'E102', 'E204'])[1 + i %% 7] END,
       CASE WHEN s.state IN ('failed', 'retrying') THEN 'synthetic failure' END,
       t.created,
       CASE WHEN s.state <> 'queued' THEN t.created + interval '5 seconds' END,
       CASE WHEN s.state IN ('succeeded', 'failed', 'cancelled')
            THEN t.created + make_interval(secs => 10 + i %% 120) END,
       CASE WHEN s.state IN ('succeeded', 'failed', 'cancelled')
            THEN t.created + make_interval(secs => 10 + i %% 120) ELSE t.created END
FROM generate_series(1, %(jobs)s) AS i
CROSS JOIN LATERAL (
    SELECT now() - interval '30 days' * (1 - i::float8 / %(jobs)s) AS created
) t
CROSS JOIN LATERAL (
    SELECT CASE
        -- among the newest jobs, one in five is still in flight
        WHEN i > %(jobs)s - 5 * %(active)s AND i %% 5 = 0 THEN
            (ARRAY['queued', 'queued', 'queued', 'running', 'retrying'])[1 + i / 5 %% 5]
        WHEN i %% 100 < 90 THEN 'succeeded'
        WHEN i %% 100 < 96 THEN 'failed'
        ELSE 'cancelled'
    END AS state
) s
"""


def explain(
    conn: psycopg.Connection, text: str, params: dict[str, Any], runs: int
) -> dict[str, Any]:
    bound = ClientCursor(conn).mogrify(text, params)
    best: dict[str, Any] | None = None
    for _ in range(runs):
        with conn.transaction(force_rollback=True):
            row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {bound}").fetchone()
        assert row is not None
        plan = row[0][0]
        if best is None or plan["Execution Time"] < best["Execution Time"]:
            best = plan
    assert best is not None
    return {
        "execution_ms": round(best["Execution Time"], 3),
        "planning_ms": round(best["Planning Time"], 3),
        "indexes": sorted(_indexes(best["Plan"])),
        "rows": best["Plan"].get("Actual Rows"),
        "shared_hit_blocks": best["Plan"].get("Shared Hit Blocks"),
        "shared_read_blocks": best["Plan"].get("Shared Read Blocks"),
    }


def _indexes(node: dict[str, Any]) -> set[str]:
    found = {f"{node['Node Type']}: {node['Index Name']}"} if "Index Name" in node else set()
    if node["Node Type"] == "Seq Scan":
        found.add(f"Seq Scan: {node['Relation Name']}")
    for child in node.get("Plans", []):
        found |= _indexes(child)
    return found


@contextmanager
def synthetic_history(conn: psycopg.Connection, jobs: int, active: int) -> Iterator[None]:
    """``jobs`` synthetic jobs over 30 days (``active`` of the newest still in flight), in one
    transaction with the block's own statements (more history, the jobs a bench opens).

    The guard triggers refuse rows born finished, so they are off for this transaction only
    (``session_replication_role = replica``, which needs a superuser). VACUUM ANALYZE is the
    caller's, after the block: it cannot run inside a transaction.
    """
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(LOAD_JOBS, {"jobs": jobs, "active": active})
        yield


def bench_arguments(description: str) -> argparse.ArgumentParser:
    """The options every store benchmark takes (bench/admin_queries.py adds its own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--active", type=int, default=20_000, help="jobs still in flight")
    parser.add_argument("--runs", type=int, default=5, help="EXPLAIN ANALYZE runs per query")
    parser.add_argument(
        "--server",
        default=os.environ.get(
            "DOCLANE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1/postgres"
        ),
        help="a database on the server to create the scratch database from",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", action="store_true", help="do not drop the scratch database")
    return parser


def in_scratch_database(
    args: argparse.Namespace, prefix: str, run: Callable[[str, argparse.Namespace], Any]
) -> Any:
    """``run(url, args)`` on a database of its own, dropped afterwards unless ``--keep``."""
    name = f"{prefix}_{os.getpid()}"
    url = make_conninfo(args.server, dbname=name)
    with psycopg.connect(args.server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        return run(url, args)
    finally:
        if not args.keep:
            with psycopg.connect(args.server, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
