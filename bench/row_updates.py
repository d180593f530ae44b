"""What a job's two updates cost PostgreSQL (claimed, then finished), and which part of the schema
pays for it: the floor's largest PostgreSQL part (docs/benchmarks.md, *The floor part by part
again*).

For each variant, a freshly migrated scratch database, ``2 x --jobs`` queued jobs inserted, then
for ``--jobs`` of them, one at a time, each in its own transaction (``synchronous_commit`` off:
the disk is not what is measured), the two UPDATEs a job's row gets (queued -> running with a
lease, running -> succeeded), as plain statements; the backend's CPU from ``/proc``, a job:

- ``as-is``: the schema as the migrations leave it;
- ``fewer-indexes``: without five non-partial secondary indexes of ``jobs`` (those re-entered by
  every update that is not HOT, whatever it changes);
- ``without:<trigger>``: with that trigger of ``jobs`` disabled (``jobs_log_update``: the
  history; ``jobs_count_lanes_updated``: the fair claim's lane counts; ``jobs_guard_update``:
  the state machine's transitions);
- ``no-triggers``: every user trigger of ``jobs`` disabled.

Variants alternate, ``--rounds`` times. Not the store's own statements (``claim_jobs``,
``finish_attempt``: their execution is in pg_stat_statements' breakdown in the same section):
the row's own cost under each part of the schema.

    .venv/bin/python -m bench.row_updates [--jobs 4000] [--rounds 2] [--json] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import time

import psycopg

from bench.harness import print_json, process_cpu_s, scratch_database
from pipeline.settings import read_settings
from pipeline.store import apply_migrations

SECONDARY = (
    "jobs_created_idx",
    "jobs_queue_created_idx",
    "jobs_state_created_idx",
    "jobs_tenant_created_idx",
    "jobs_submission_idx",
)
VARIANTS = (
    "as-is",
    "fewer-indexes",
    "without:jobs_log_update",
    "without:jobs_count_lanes_updated",
    "without:jobs_guard_update",
    "no-triggers",
)
CLAIM = (
    "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
    " attempts_spent = attempts_spent + 1, lease_owner = 'bench',"
    " lease_expires_at = now() + interval '60 s', started_at = now(), stage = 'converting',"
    " updated_at = now() WHERE id = %s"
)
FINISH = (
    "UPDATE jobs SET state = 'succeeded', finished_at = now(), stage = NULL,"
    " lease_owner = NULL, lease_expires_at = NULL, updated_at = now() WHERE id = %s"
)


def measure(variant: str, jobs: int) -> dict[str, float]:
    """The backend's CPU and the wall time, ms a job, of ``jobs`` jobs' two updates."""
    with scratch_database(f"doclane_bench_rows_{os.getpid()}") as url:
        apply_migrations(read_settings(store={"database_url": url}).store)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (source_kind, source_uri, size_bytes, content_sha256, profile,"
                " formats, queue, submission_id)"
                " SELECT 'file', '/bench/' || g, 10, repeat('a', 64), 'docling-mcp', '{md}',"
                " 'doclane.small', gen_random_uuid() FROM generate_series(1, %s) g",
                (2 * jobs,),
            )
            if variant == "fewer-indexes":
                for index in SECONDARY:
                    conn.execute(f"DROP INDEX {index}")
            elif variant == "no-triggers":
                conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
            elif variant.startswith("without:"):
                conn.execute(f"ALTER TABLE jobs DISABLE TRIGGER {variant.split(':', 1)[1]}")
            conn.execute("VACUUM ANALYZE jobs")
            # What the variant really took away, reported so a smoke run can check it.
            shape = conn.execute(
                "SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'jobs'::regclass"
                " AND NOT tgisinternal AND tgenabled <> 'D'),"
                " (SELECT count(*) FROM pg_indexes WHERE tablename = 'jobs')"
            ).fetchone()
            assert shape is not None
            ids = [row[0] for row in conn.execute("SELECT id FROM jobs LIMIT %s", (jobs,))]
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert backend is not None
            conn.execute("SET synchronous_commit = off")
            cpu, started = process_cpu_s(backend[0]), time.perf_counter()
            for job_id in ids:
                conn.execute(CLAIM, (job_id,))
                conn.execute(FINISH, (job_id,))
            wall = time.perf_counter() - started
            cpu = process_cpu_s(backend[0]) - cpu
            succeeded = conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'")
            done = succeeded.fetchone()
        if done is None or done[0] != jobs:
            raise SystemExit(f"{variant}: {done} jobs succeeded, not {jobs}")
    return {
        "backend_cpu_ms": round(cpu / jobs * 1000, 3),
        "wall_ms": round(wall / jobs * 1000, 3),
        "triggers_on": float(shape[0]),
        "indexes": float(shape[1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="50 jobs, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.rounds = 50, 1
    variants = args.variants.split(",")
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.rounds):  # A B C ... A B C: side by side
        for variant in variants:
            runs[variant].append(measure(variant, args.jobs))
    if args.json:
        print_json({"jobs": args.jobs, "variants": runs})
        return
    print(f"{args.jobs} jobs, two updates each; backend CPU ms a job (wall ms), each round")
    for variant, figures in runs.items():
        shown = ", ".join(f"{f['backend_cpu_ms']:.3f} ({f['wall_ms']:.3f})" for f in figures)
        print(f"{variant:<34} {shown}")


if __name__ == "__main__":
    main()
