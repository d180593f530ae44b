"""Tenants on one fleet: how long a small tenant waits behind a big one, and what fairness costs
(docs/benchmarks.md, *Tenants*).

One fake Docling MCP server answering every tool call after ``--delay-ms`` (20 ms: a real
conversion's order of magnitude, so that the queue, not the pipeline, is what a job waits for);
one ``doclane worker -c --concurrency`` on a freshly migrated scratch database and a Redis
database claimed as the test suite claims its brokers. Two figures, each mode alternated with
the other ``--repeats`` times (A B A B), so that both see the same machine:

1. *Fair wait*. Tenant ``big`` submits ``--backlog`` jobs; once the worker has finished
   ``--head`` of them, tenant ``small`` submits ``--small`` jobs. The figure is how long those
   take from their submission to the last one's result (by the database's clock: ``created_at``
   to ``finished_at``), against what they would take alone (``--small`` jobs at the backlog's
   measured rate). Mode ``tenants``: ``big`` and ``small`` are two tenants. Mode ``one-tenant``:
   both submit as ``default``, which is FIFO within its priority, as every submission was
   before tenants (the wait then is the rest of the backlog).
2. *Fairness is free*. ``--jobs`` jobs, all submitted before the worker starts, run to the end:
   mode ``one-tenant`` all of them ``default``'s, mode ``two-tenants`` half ``a``'s and half
   ``b``'s. The figure is the rate (jobs over first claim to last result): the fair claim must
   not cost throughput (the same within 5%).

    .venv/bin/python -m bench.tenant_fairness [--backlog 10000] [--repeats 2] [--smoke]

``--smoke`` (what CI runs) makes every count tiny: it proves the bench works, its figures mean
nothing. Everything started is stopped and every scratch database removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import (
    DOCLANE,
    TOOLS,
    Broker,
    FakeServer,
    claim_redis_db,
    print_json,
    scratch_database,
    start_worker,
    stop_worker,
    wait_finished,
    worker_env,
    write_documents,
)


@dataclass
class FairWait:
    mode: str
    small_s: float  # the small tenant's jobs: first submitted to last result
    alone_s: float  # what they would take alone, at the backlog's rate
    backlog_left: int  # the big tenant's jobs not yet ended when the small tenant's last did
    ends_s: list[float]  # each small job's end, from the small tenant's submission, in order

    def row(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "small_wait_s": round(self.small_s, 2),
            "alone_s": round(self.alone_s, 2),
            "ratio_to_alone": round(self.small_s / self.alone_s, 1) if self.alone_s else None,
            "backlog_left_then": self.backlog_left,
        }


@dataclass
class Rate:
    mode: str
    jobs: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def submit(env: dict[str, str], folder: Path, tenant: str) -> None:
    done = subprocess.run(
        [DOCLANE, "submit", str(folder), "--tenant", tenant, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"doclane submit --tenant {tenant} failed: {done.stderr[-2000:]}")


def make_tenants(db_url: str, *names: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        for name in names:
            conn.execute("INSERT INTO tenants (name) VALUES (%s) ON CONFLICT DO NOTHING", [name])


def count_ended(db_url: str, tenant: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jobs WHERE tenant = %s AND finished_at IS NOT NULL", [tenant]
        ).fetchone()
    return int(row[0]) if row else 0


def wait_tenant_ended(db_url: str, tenant: str, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while count_ended(db_url, tenant) < count:  # a bench's own wait, bounded, then it says so
        if time.monotonic() > deadline:
            raise SystemExit(f"{tenant}'s {count} jobs did not end within {timeout_s:.0f} s")
        time.sleep(0.05)


def fair_wait(
    mode: str, args: argparse.Namespace, server: FakeServer, broker: Broker, scratch: Path
) -> FairWait:
    big, small = ("big", "small") if mode == "tenants" else ("default", "default")
    tag = f"{mode}-{time.monotonic_ns()}"
    backlog = scratch / f"backlog-{tag}"
    write_documents(backlog, args.backlog, f"big-{tag}")
    few = scratch / f"small-{tag}"
    smalls = [
        p.rename(p.with_name(f"small-{p.name}"))
        for p in write_documents(few, args.small, f"small-{tag}")
    ]
    broker.flush()
    with scratch_database(f"doclane_bench_fair_{os.getpid()}") as db_url:
        env = worker_env(db_url, broker, server.url, DOCLANE_SERVER_CACHE_DIR=str(server.cache_dir))
        worker = start_worker(
            env, scratch / f"worker-{tag}.log", "--concurrency", str(args.concurrency)
        )
        try:
            make_tenants(db_url, "big", "small")
            submit(env, backlog, big)
            wait_tenant_ended(db_url, big, args.head, timeout_s=600)
            submit(env, few, small)
            with psycopg.connect(db_url) as conn:
                deadline = time.monotonic() + 3600
                while True:  # a bench's own wait, bounded
                    row = conn.execute(
                        "SELECT count(*) FILTER (WHERE finished_at IS NOT NULL),"
                        " extract(epoch FROM max(finished_at) - min(created_at))::float8"
                        " FROM jobs WHERE source_uri LIKE '%%/small-%%'"
                    ).fetchone()
                    assert row is not None
                    if int(row[0]) >= len(smalls):
                        small_s = float(row[1])
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit("the small tenant's jobs did not end within an hour")
                    conn.commit()
                    time.sleep(0.05)
                ends = conn.execute(
                    "SELECT extract(epoch FROM finished_at - min(created_at) OVER ())::float8 AS s"
                    " FROM jobs WHERE source_uri LIKE '%%/small-%%' ORDER BY s"
                ).fetchall()
                left = conn.execute(
                    "SELECT count(*) FROM jobs WHERE source_uri NOT LIKE '%%/small-%%'"
                    " AND finished_at IS NULL"
                ).fetchone()
                first, last, ended = conn.execute(
                    "SELECT extract(epoch FROM min(started_at))::float8,"
                    " extract(epoch FROM max(finished_at))::float8, count(finished_at)"
                    " FROM jobs WHERE source_uri NOT LIKE '%%/small-%%'"
                ).fetchone() or (0.0, 0.0, 0)
        finally:
            stop_worker(worker)
    backlog_rate = ended / (last - first) if ended and last > first else 0.0
    alone = len(smalls) / backlog_rate if backlog_rate else 0.0
    return FairWait(mode, small_s, alone, int(left[0]) if left else 0, [float(e[0]) for e in ends])


def rate(
    mode: str, args: argparse.Namespace, server: FakeServer, broker: Broker, scratch: Path
) -> Rate:
    tag = f"{mode}-{time.monotonic_ns()}"
    owners = ["default"] if mode == "one-tenant" else ["a", "b"]
    folders = []
    for owner in owners:
        folder = scratch / f"rate-{tag}-{owner}"
        write_documents(folder, args.jobs // len(owners), f"{owner}-{tag}")
        folders.append((folder, owner))
    broker.flush()
    with scratch_database(f"doclane_bench_rate_{os.getpid()}") as db_url:
        env = worker_env(db_url, broker, server.url, DOCLANE_SERVER_CACHE_DIR=str(server.cache_dir))
        subprocess.run([DOCLANE, "db", "migrate"], env=env, check=True, capture_output=True)
        make_tenants(db_url, "a", "b")
        for folder, owner in folders:
            submit(env, folder, owner)
        worker = start_worker(
            env, scratch / f"worker-{tag}.log", "--concurrency", str(args.concurrency)
        )
        try:
            wait_finished(db_url, args.jobs // len(owners) * len(owners), timeout=3600)
            with psycopg.connect(db_url) as conn:
                first, last, jobs = conn.execute(
                    "SELECT extract(epoch FROM min(started_at))::float8,"
                    " extract(epoch FROM max(finished_at))::float8, count(*) FROM jobs"
                ).fetchone() or (0.0, 0.0, 0)
        finally:
            stop_worker(worker)
    return Rate(mode, int(jobs), float(last) - float(first))


def plot(waits: list[FairWait], args: argparse.Namespace, path: Path) -> None:
    """The small tenant's jobs ended against the time since their submission, one line a run:
    beside the big tenant (fair), behind its backlog (one tenant), and alone (at the backlog's
    rate, dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"tenants": "tab:green", "one-tenant": "tab:red"}
    labels = {"tenants": "two tenants (the fair claim)", "one-tenant": "one tenant (FIFO)"}
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for n, wait in enumerate(waits):
        label = labels[wait.mode] if n < 2 else None
        counts = range(1, len(wait.ends_s) + 1)
        ax.step(wait.ends_s, counts, where="post", color=colors[wait.mode], label=label)
    alone = statistics.median(w.alone_s for w in waits)
    ax.axvline(alone, color="grey", linestyle=":", label=f"alone: {alone:.2f} s")
    ax.set_xscale("log")
    ax.set_xlabel("seconds since the small tenant submitted")
    ax.set_ylabel(f"its {args.small} jobs ended")
    ax.set_title(
        f"A tenant's {args.small} jobs behind another's {args.backlog:,}"
        f" ({args.delay_ms:.0f} ms calls, -c {args.concurrency})"
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}", file=sys.stderr)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=2000, help="the big tenant's jobs")
    parser.add_argument(
        "--head", type=int, default=100, help="of them ended before the small submit"
    )
    parser.add_argument("--small", type=int, default=10, help="the small tenant's jobs")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the rate figure")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the server's time a call")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", choices=["wait", "rate"], default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: proves it runs")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    parser.add_argument("--plot", type=Path, default=None, help="draw the fair waits (PNG)")
    args = parser.parse_args()
    if args.smoke:
        args.backlog, args.head, args.small, args.jobs, args.repeats = 40, 4, 3, 20, 1
        args.delay_ms = 1.0
    return args


def main() -> None:
    args = parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-tenants-", dir=TOOLS))
    server = FakeServer(scratch, cache_max_documents=args.backlog + args.jobs + 100)
    broker = claim_redis_db()
    waits: list[FairWait] = []
    rates: list[Rate] = []
    try:
        server.start()
        server.configure(delay_s=args.delay_ms / 1000)
        for _ in range(args.repeats):
            if args.only in (None, "wait"):
                for mode in ("tenants", "one-tenant"):
                    waits.append(fair_wait(mode, args, server, broker, scratch))
                    print(f"fair wait, {mode}: {waits[-1].row()}", file=sys.stderr)
            if args.only in (None, "rate"):
                for mode in ("one-tenant", "two-tenants"):
                    rates.append(rate(mode, args, server, broker, scratch))
                    print(f"rate, {mode}: {rates[-1].per_s:.1f} jobs/s", file=sys.stderr)
    finally:
        server.stop()
        broker.release()
        shutil.rmtree(scratch, ignore_errors=True)
    if args.plot is not None and waits:
        plot(waits, args, args.plot)
    medians = {
        mode: statistics.median(r.per_s for r in rates if r.mode == mode)
        for mode in {r.mode for r in rates}
    }
    report = {
        "bench": "tenant_fairness",
        "delay_ms": args.delay_ms,
        "concurrency": args.concurrency,
        "backlog": args.backlog,
        "small": args.small,
        "fair_wait": [w.row() for w in waits],
        "rate": [
            {
                "mode": r.mode,
                "jobs": r.jobs,
                "seconds": round(r.seconds, 2),
                "per_s": round(r.per_s, 1),
            }
            for r in rates
        ],
        "rate_median_per_s": {m: round(v, 1) for m, v in medians.items()},
        "two_over_one": round(medians["two-tenants"] / medians["one-tenant"], 3)
        if medians.get("one-tenant") and "two-tenants" in medians
        else None,
    }
    if args.json:
        print_json(report)
    else:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
