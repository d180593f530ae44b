"""What a job's two updates cost PostgreSQL (claimed, then finished), and which part of the schema
pays for it: the floor's largest PostgreSQL part (docs/benchmarks.md, *What we learned*).

For each variant, a freshly migrated scratch database, ``2 x --jobs`` queued jobs inserted, then
for ``--jobs`` of them, one at a time, each in its own transaction (``synchronous_commit`` off:
the disk is not what is measured), the UPDATEs a job's row gets, as plain statements, a step
at a time over all the jobs (queued -> running with a lease; ``--renewals`` lease renewals;
running -> succeeded); the backend's CPU from ``/proc``, a job (``backend_cpu_ms``: the claim
and the end, the two updates; ``renewal_cpu_ms``: one renewal). Then the other ``--jobs`` are
claimed and ended by the store's own ``finish_attempt`` with two calls, a note and a result,
as a lone worker ends a job (``finish_attempt_cpu_ms``, the end alone; 0 where the guard is
off, which derives the end's finished_at), and ``--jobs`` more ended 8 at a time as a round's
are (``round_end_cpu_ms``, a job's share: ``finish_attempts`` where the schema has it, else a
``finish_attempt`` each in one transaction). Variants:

- ``as-is``: the schema as the migrations leave it;
- ``before:<version>``: the migrations older than that one only (the schema a change started
  from, measured beside it in the same run);
- ``fewer-indexes``: without five non-partial secondary indexes of ``jobs`` (those re-entered by
  every update that is not HOT, whatever it changes);
- ``without:<trigger>``: with that trigger of ``jobs`` disabled (``jobs_guard_update``: the
  state machine's transitions, their history and lane counts; ``jobs_count_lanes_updated``: a
  queued job's move to another lane);
- ``no-triggers``: every user trigger of ``jobs`` disabled.

Variants alternate, ``--rounds`` times.

    .venv/bin/python -m bench.row_updates [--jobs 4000] [--rounds 2] [--renewals 1]
        [--variants as-is,before:0025] [--json] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import psycopg

from bench.harness import print_json, process_cpu_s, scratch_database
from pipeline.settings.tree import read_settings
from pipeline.store.database import apply_migrations
from pipeline.store.queries import query
from pipeline.store.rows import AttemptResults, CallEvent, calls_json, jsonb, round_params
from pipeline.store.settings import DEFAULT_MIGRATIONS_DIR

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
RENEW = (
    "UPDATE jobs SET lease_expires_at = now() + interval '60 s'"
    " WHERE id = %s AND attempt = 1 AND state = 'running'"
)
FINISH = (
    "UPDATE jobs SET state = 'succeeded', finished_at = now(), stage = NULL,"
    " lease_owner = NULL, lease_expires_at = NULL, updated_at = now() WHERE id = %s"
)
#: What a lone worker's end sends (pipeline.store.rows.AttemptResults.params): two calls, a
#: note naming the engine, one small result.
CALLS = [
    CallEvent("convert", 0.0125, "ok", origin="http://mcp"),
    CallEvent("export", 0.003, "ok", origin="http://mcp"),
]
NOTE = {"note": "converted by docling-mcp", "engine": "docling 2.0"}
#: A round's jobs ended together (DOCLANE_ROUND_MAX_DOCS' default).
ROUND = 8


def migrations_before(version: str, into: Path) -> Path:
    """A folder holding the repository's migrations older than ``version``."""
    for path in sorted(DEFAULT_MIGRATIONS_DIR.glob("*.sql")):
        if path.name[:4] < version:
            shutil.copy(path, into / path.name)
    return into


def migrate(url: str, variant: str) -> None:
    store = {"database_url": url}
    if variant.startswith("before:"):
        with tempfile.TemporaryDirectory() as folder:
            store["migrations_dir"] = str(migrations_before(variant[7:], Path(folder)))
            apply_migrations(read_settings(store=store).store)
    else:
        apply_migrations(read_settings(store=store).store)


def timed(pid: int, step: Callable[[], None]) -> tuple[float, float]:
    """The backend's CPU and the wall time, s, of ``step``."""
    cpu, started = process_cpu_s(pid), time.perf_counter()
    step()
    return process_cpu_s(pid) - cpu, time.perf_counter() - started


def hot_updates(conn: psycopg.Connection, updates: int) -> tuple[int, int]:
    """``jobs``' updates and HOT updates so far, once the counters hold ``updates`` updates
    (a backend's counts reach the shared statistics a moment after its statements)."""
    deadline = time.monotonic() + 10
    while True:
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs'"
        ).fetchone()
        assert row is not None
        if row[0] >= updates or time.monotonic() > deadline:
            return int(row[0]), int(row[1])
        time.sleep(0.05)


def finish_rounds(conn: psycopg.Connection, job_ids: list[UUID]) -> Callable[[], None]:
    """``job_ids`` claimed, then ended ``ROUND`` at a time as the store of this schema ends a
    round's jobs: one ``finish_attempts`` where the schema has it, else a ``finish_attempt``
    each, in one transaction (both pipelined, one round trip)."""
    for job_id in job_ids:
        conn.execute(CLAIM, (job_id,))
    conn.execute("ANALYZE jobs")
    together = conn.execute("SELECT to_regproc('finish_attempts') IS NOT NULL").fetchone()
    ends = [
        AttemptResults(
            job_id,
            1,
            {"md": "# a converted document\n\nIts text."},
            calls=CALLS,
            note=NOTE,
            origin="http://mcp",
        )
        for job_id in job_ids
    ]

    def run() -> None:
        for start in range(0, len(ends), ROUND):
            group = ends[start : start + ROUND]
            with conn.pipeline(), conn.transaction():
                if together and together[0]:
                    conn.execute(query("finish_attempts"), round_params(group))
                else:
                    for end in group:
                        conn.execute(query("finish_attempt"), end.params())

    return run


def measure(variant: str, jobs: int, renewals: int) -> dict[str, float]:
    """The backend's CPU and the wall time, ms a job, of each step of ``jobs`` jobs."""
    with scratch_database(f"doclane_bench_rows_{os.getpid()}") as url:
        migrate(url, variant)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (source_kind, source_uri, size_bytes, content_sha256, profile,"
                " formats, queue, submission_id)"
                " SELECT 'file', '/bench/' || g, 10, repeat('a', 64), 'docling-mcp', '{md}',"
                " 'doclane.small', gen_random_uuid() FROM generate_series(1, %s) g",
                (3 * jobs,),
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
            every = [row[0] for row in conn.execute("SELECT id FROM jobs ORDER BY id")]
            ids, store_ids, round_ids = every[:jobs], every[jobs : 2 * jobs], every[2 * jobs :]
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert backend is not None
            pid = backend[0]
            conn.execute("SET synchronous_commit = off")

            def each(statement: str, job_ids: list[object], times: int = 1) -> Callable[[], None]:
                def run() -> None:
                    for _ in range(times):
                        for job_id in job_ids:
                            conn.execute(statement, (job_id,))

                return run

            claim_cpu, claim_wall = timed(pid, each(CLAIM, ids))
            # Statistics that know the jobs run, as autovacuum's would: with the load's (none
            # running), the planner takes the running jobs' partial index for a fenced write
            # (id, attempt, state = 'running') and reads every running job to find one.
            conn.execute("ANALYZE jobs")
            before = hot_updates(conn, jobs)
            renew_cpu, renew_wall = timed(pid, each(RENEW, ids, renewals))
            after = hot_updates(conn, jobs + renewals * jobs)
            finish_cpu, finish_wall = timed(pid, each(FINISH, ids))

            end = query("finish_attempt")
            each(CLAIM, store_ids)()
            conn.execute("ANALYZE jobs")

            def finish_attempts() -> None:
                for job_id in store_ids:
                    params = {
                        "job_id": job_id,
                        "attempt": 1,
                        "formats": ["md"],
                        "contents": ["# a converted document\n\nIts text."],
                        "calls": calls_json(CALLS),
                        "note": jsonb(NOTE),
                        "origin": "http://mcp",
                    }
                    conn.execute(end, params)

            # finish_attempt leaves finished_at to the guard: without it, no such step
            store_step = variant not in ("no-triggers", "without:jobs_guard_update")
            store_cpu, _ = timed(pid, finish_attempts) if store_step else (0.0, 0.0)
            round_cpu, _ = timed(pid, finish_rounds(conn, round_ids)) if store_step else (0.0, 0.0)
            succeeded = conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'")
            done = succeeded.fetchone()
        wanted = 3 * jobs if store_step else jobs
        if done is None or done[0] != wanted:
            raise SystemExit(f"{variant}: {done} jobs succeeded, not {wanted}")
    renewed = max(renewals * jobs, 1)
    return {
        "backend_cpu_ms": round((claim_cpu + finish_cpu) / jobs * 1000, 3),
        "wall_ms": round((claim_wall + finish_wall) / jobs * 1000, 3),
        "claim_cpu_ms": round(claim_cpu / jobs * 1000, 3),
        "finish_cpu_ms": round(finish_cpu / jobs * 1000, 3),
        "renewal_cpu_ms": round(renew_cpu / renewed * 1000, 3),
        "renewal_wall_ms": round(renew_wall / renewed * 1000, 3),
        "renewals_hot": round((after[1] - before[1]) / max(after[0] - before[0], 1), 3),
        "finish_attempt_cpu_ms": round(store_cpu / jobs * 1000, 3),
        "round_end_cpu_ms": round(round_cpu / jobs * 1000, 3),
        "triggers_on": float(shape[0]),
        "indexes": float(shape[1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--renewals", type=int, default=1, help="lease renewals a job")
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
            runs[variant].append(measure(variant, args.jobs, args.renewals))
    if args.json:
        print_json({"jobs": args.jobs, "variants": runs})
        return
    print(
        f"{args.jobs} jobs; backend CPU ms, each round: the two updates (wall ms) |"
        " a renewal (share HOT) | finish_attempt | a round's end"
    )
    for variant, figures in runs.items():
        shown = ", ".join(
            f"{f['backend_cpu_ms']:.3f} ({f['wall_ms']:.3f}) | {f['renewal_cpu_ms']:.3f}"
            f" ({f['renewals_hot']:.2f}) | {f['finish_attempt_cpu_ms']:.3f}"
            f" | {f['round_end_cpu_ms']:.3f}"
            for f in figures
        )
        print(f"{variant:<34} {shown}")


if __name__ == "__main__":
    main()
