"""Are the admin views fast at a million jobs? ``doclane stats``, ``jobs``, ``status``, the API.

Loads the same synthetic history as ``bench/store_admin_queries.py`` (default 1,000,000 jobs over
30 days) plus two MCP calls per finished job in the trail, rolls the history up once (what the
first reader after ``doclane db migrate`` on an existing database would otherwise do: migration
0007 does it at migrate time), then measures:

- the database time of one ``doclane stats`` (every query it sends, under ``EXPLAIN ANALYZE``,
  summed; best of ``--runs``), and the same figures through ``JobStore.admin`` in Python;
- ``doclane jobs --state failed --limit 50`` and ``doclane status JOB`` (their queries);
- ``GET /v1/stats`` and ``GET /metrics`` end to end over HTTP from a ``doclane api`` process on
  this database and the local Redis (median and worst of ``--requests``).

    .venv/bin/python -m bench.admin_queries [--jobs 1000000] [--json] [--keep]

The scratch database (``doclane_bench_admin_<pid>``) is dropped at the end unless ``--keep``.
It needs Redis on 127.0.0.1:6379 (database 7 is used as the API's broker) for the HTTP part.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg

from bench.harness.figures import percentile
from bench.harness.store import bench_arguments, explain, in_scratch_database, synthetic_history
from pipeline.admin.stats import _job_figures
from pipeline.jobs.model import JobState
from pipeline.queues import MEDIUM_BELOW_BYTES, SMALL_BELOW_BYTES
from pipeline.settings.tree import read_settings
from pipeline.store.admin import JobFilter, list_jobs_params
from pipeline.store.database import apply_migrations
from pipeline.store.queries import query
from pipeline.store.store import JobStore

LOAD_EVENTS = """
INSERT INTO job_events (job_id, attempt, kind, tool, duration_ms, outcome, server_origin, at)
SELECT id, 1, 'mcp_call', t.tool, 40 + (abs(hashtext(id::text)) %% 4000), 'ok',
       'http://docling:8765', finished_at - interval '1 second'
FROM jobs
CROSS JOIN (VALUES ('convert_document_into_docling_document'),
                   ('export_docling_document_to_markdown')) AS t(tool)
WHERE finished_at IS NOT NULL
"""

RESET_ROLLUPS = """
TRUNCATE finished_rollup, event_rollup;
UPDATE rollup_marks SET finished_before = '2000-01-01', events_before = '2000-01-01';
"""


def main() -> None:
    parser = bench_arguments(__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=30, help="HTTP requests per endpoint")
    args = parser.parse_args()
    report = in_scratch_database(args, "doclane_bench_admin", run)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    apply_migrations(read_settings(store=dict(database_url=url)).store)
    report: dict[str, Any] = {"jobs": args.jobs}
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        with synthetic_history(conn, args.jobs, args.active):
            conn.execute(LOAD_EVENTS, {})
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("VACUUM ANALYZE job_events")
        report["load_s"] = round(time.perf_counter() - started, 1)
        report["events"] = conn.execute("SELECT count(*) FROM job_events").fetchone()[0]  # type: ignore[index]
        conn.execute(RESET_ROLLUPS)

        store = JobStore(
            read_settings(store=dict(database_url=url)).store, explain_missing_schema=True
        )
        started = time.perf_counter()
        store.admin.roll_up()
        report["first_rollup_s"] = round(time.perf_counter() - started, 2)
        conn.execute("VACUUM ANALYZE finished_rollup, event_rollup, rollup_marks")

        now = datetime.now(UTC)
        row = conn.execute(query("rollup_marks")).fetchone()
        assert row is not None
        marks = {"finished_before": row[0], "events_before": row[1]}
        stats_cases: dict[str, tuple[str, dict[str, Any]]] = {
            "counts in flight": ("count_in_flight", {"tenant": None}),
            "all-time totals (rollup + since mark)": ("finished_totals", marks),
            "failures by code, last hour": (
                "failures_by_error_code",
                {"since": now - timedelta(hours=1)},
            ),
            "throughput 1/5/60 min + per minute": ("throughput", {}),
            "p50/p95 by size tier, last hour": (
                "conversion_percentiles",
                {
                    "window_s": 3600.0,
                    "small_below": SMALL_BELOW_BYTES,
                    "medium_below": MEDIUM_BELOW_BYTES,
                },
            ),
        }
        stats = {
            label: explain(conn, query(q), params, args.runs)
            for label, (q, params) in stats_cases.items()
        }
        report["stats_queries"] = stats
        report["stats_db_ms"] = round(
            sum(r["execution_ms"] + r["planning_ms"] for r in stats.values()), 2
        )
        report["stats_python_ms"] = _best_ms(lambda: _job_figures(store, 3600.0), args.runs)

        failed = list_jobs_params(JobFilter(state=JobState.FAILED, limit=50))
        report["jobs_failed_50"] = explain(conn, query("list_jobs"), failed, args.runs)
        some = conn.execute(
            "SELECT id FROM jobs WHERE state = 'succeeded' LIMIT 1 OFFSET %s", (args.jobs // 200,)
        )
        job_id = some.fetchone()[0]  # type: ignore[index]
        status = {
            q: explain(conn, query(q), {"job_id": job_id}, args.runs)
            for q in ("get_job", "list_results", "job_events")
        }
        report["status_queries"] = status
        report["status_db_ms"] = round(
            sum(r["execution_ms"] + r["planning_ms"] for r in status.values()), 3
        )
        report["metrics_event_totals"] = explain(conn, query("event_totals"), marks, args.runs)
        store.close()
    report["http"] = _http(url, args.requests)
    return report


def _total_ms(plans: dict[str, dict[str, Any]]) -> float:
    """Execution plus planning: what the database spends on the queries of one command."""
    return round(float(sum(p["execution_ms"] + p["planning_ms"] for p in plans.values())), 3)


def _best_ms(fn: Any, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 2)


def _http(url: str, requests: int) -> dict[str, Any]:
    token = secrets.token_urlsafe(12)
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": url,
        "DOCLANE_BROKER_URL": "redis://127.0.0.1:6379/7",
        "DOCLANE_API_TOKEN": token,
        "DOCLANE_BREAKER_NAMESPACE": f"bench-{os.getpid()}",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "api", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    try:
        base = None
        assert process.stdout is not None
        for line in process.stdout:
            found = re.search(r"Uvicorn running on (http://\S+)", line)
            if found:
                base = found.group(1)
                break
        assert base, "doclane api did not start"
        headers = {"Authorization": f"Bearer {token}"}
        out: dict[str, Any] = {}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            for path in ("/v1/stats", "/metrics", "/"):
                client.get(path).raise_for_status()  # warm: connections, plans
                times = []
                for _ in range(requests):
                    started = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append((time.perf_counter() - started) * 1000)
                out[path] = {
                    "median_ms": round(statistics.median(times), 1),
                    "p90_ms": round(percentile(times, 0.9), 1),
                    "max_ms": round(max(times), 1),
                }
        return out
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def print_report(report: dict[str, Any]) -> None:
    print(
        f"{report['jobs']:,} jobs and {report['events']:,} trail events loaded in "
        f"{report['load_s']} s; first rollup {report['first_rollup_s']} s"
    )
    print(f"\ndoclane stats, database time: {report['stats_db_ms']} ms (planning included)")
    for label, r in report["stats_queries"].items():
        print(f"  {label:42} {r['execution_ms']:>8.3f} ms  {'; '.join(r['indexes'])}")
    print(f"  the same through the store, in Python: {report['stats_python_ms']} ms")
    j = report["jobs_failed_50"]
    print(
        f"\ndoclane jobs --state failed --limit 50: {j['execution_ms']} ms "
        f"(+{j['planning_ms']} planning)  {'; '.join(j['indexes'])}"
    )
    print(f"doclane status JOB, database time: {report['status_db_ms']} ms")
    m = report["metrics_event_totals"]
    print(f"/metrics trail sums (event_totals): {m['execution_ms']} ms")
    print("\nHTTP, end to end (median / p90 / max ms):")
    for path, r in report["http"].items():
        print(f"  GET {path:10} {r['median_ms']:>7} {r['p90_ms']:>7} {r['max_ms']:>7}")


if __name__ == "__main__":
    main()
