"""Scale-out, simulated (docs/benchmarks.md): servers x worker processes against linear.

Fake Docling MCP servers (tests/fakes) whose convert takes a fixed ``--tool-ms`` (200 ms; export
is instant) and which work on at most ``--server-slots`` calls at once (the fake's
``max_concurrent_calls``: a server with that many conversion slots; the others wait their turn).
For each point of a small grid, ``doclane worker -c W`` (batches off) with
``DOCLING_MCP_ORIGIN`` naming S of those servers converts enough jobs to run for a few seconds.

Linear is ``min(W, S x slots) / tool time``: every process busy on a free slot all the time.
Throughput is the jobs over the time from the first claim to the last commit (the database's
clocks; ``doclane submit`` runs before, not timed). The goal is at least 0.9x linear. Each point
also says where a process's time per job went (means): the MCP calls as the worker's client
timed them (the tool's time plus the server's and the wire's), and the pipeline's own share
(claim to commit minus the calls, plus the gap to the same process's next claim). Linear counts
the tool's time alone, so a call that takes 210 ms caps a point at 0.95 before the pipeline
costs anything.

    .venv/bin/python -m bench.scale_out [--points 1x1,1x2,...] [--plot docs/scale-out.png]
        [--compare-with /path/to/other/checkout] [--rounds N]

``--compare-with`` runs every point with the other checkout's ``doclane`` too, just before this
one's (A B, point by point, for ``--rounds`` rounds: a shared machine's drift then weighs on both
sides); the figures are each side's median over the rounds. The plot shows this checkout's
medians (and the other's, faint). Each run gets a freshly migrated scratch database and the
Redis database claimed as the test suite claims its brokers (flushed between runs: no breaker
state or in-flight count crosses from one run to the next). ``--smoke`` (CI) runs two tiny
points and plots into the scratch folder. Everything started is stopped and every scratch
database removed.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import (
    DOCLANE,
    ROOT,
    TOOLS,
    Broker,
    FakeServer,
    claim_redis_db,
    commit_of,
    scratch_database,
    start_worker,
    stop_worker,
    wait_finished,
    worker_env,
    write_documents,
)
from bench.harness.timeline import calls_per_job_ms, job_timeline
from pipeline.profiles.docling_mcp import CONVERT

DEFAULT_POINTS = "1x1,1x2,1x4,2x4,2x8,4x4,4x8"


@dataclass
class Run:
    """One point of the grid run once, by one checkout's code."""

    servers: int
    workers: int
    linear: float
    checkout: Path = ROOT
    jobs: int = 0
    seconds: float = 0.0
    succeeded: int = 0
    #: Conversions each server made, and the most calls one server had at once (a slot's
    #: worth more than ``--server-slots`` waited: the units were not spread evenly).
    conversions: list[int] = field(default_factory=list)
    most_at_once: int = 0
    #: Where a process's time per job goes (means, ms, so that they add up to the processes'
    #: time over the jobs): claim to commit, the MCP calls inside it (the server's answers, as
    #: the worker's client timed them), and the gap from one commit to the same process's next
    #: claim. The pipeline's own share is in job - calls + between.
    in_job_ms: float = 0.0
    calls_ms: float = 0.0
    between_ms: float = 0.0

    @property
    def pipeline_ms(self) -> float:
        return self.in_job_ms - self.calls_ms + self.between_ms

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    @property
    def ratio(self) -> float:
        return self.rate / self.linear if self.linear else 0.0


def run_point(
    run: Run,
    servers: list[FakeServer],
    *,
    knobs: dict[str, Any],
    scratch: Path,
    broker: Broker,
    seconds: float,
) -> None:
    """One run of a grid point: its own database, worker and documents; fills in its figures."""
    broker.flush()
    used = servers[: run.servers]
    for server in used:
        server.reset()  # counters and cache cleared, knobs back to start-up: set again
        server.configure(**knobs)
    run.jobs = max(6, round(run.linear * seconds))
    name = f"{run.servers}x{run.workers}"
    folder = scratch / f"docs-{name}"
    if not folder.exists():
        write_documents(folder, run.jobs, name)
    with scratch_database(f"doclane_bench_scale_{os.getpid()}") as db_url:
        env = worker_env(
            db_url,
            broker,
            ",".join(s.url for s in used),
            DOCLANE_INBOX_DIR=str(scratch / "inbox"),
            DOCLANE_LOG_LEVEL="WARNING",
            PYTHONPATH=str(run.checkout),  # whose pipeline and workers the commands import
        )
        log_path = scratch / f"worker-{name}-{run.checkout.name}.log"
        worker = start_worker(
            {**env, "DOCLANE_LOG_LEVEL": "INFO"},
            log_path,
            "--concurrency",
            str(run.workers),
            "--loglevel",
            "INFO",
        )
        try:
            subprocess.run(
                [DOCLANE, "submit", str(folder), "--json"], env=env, check=True, capture_output=True
            )
            wait_finished(db_url, run.jobs, timeout=60 + 10 * seconds)
            with psycopg.connect(db_url) as conn:
                row = conn.execute(
                    "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8,"
                    " count(*) FILTER (WHERE state = 'succeeded') FROM jobs"
                ).fetchone()
                in_job, between = job_timeline(conn)
                calls = calls_per_job_ms(conn)
            assert row is not None
            run.seconds, run.succeeded = float(row[0] or 0.0), int(row[1])
            run.in_job_ms, run.calls_ms = mean(in_job), mean(calls)
            run.between_ms = mean(between)
            stats = [server.stats() for server in used]
            run.conversions = [s["requests_by_tool"].get(CONVERT, 0) for s in stats]
            run.most_at_once = max(s["max_tool_calls_in_flight"] for s in stats)
        finally:
            stop_worker(worker)


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def plot(rows: list[dict[str, Any]], slots: int, tool_ms: float, path: Path) -> None:
    """Measured throughput against linear, one line per number of servers (faint: before)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for servers in sorted({r["servers"] for r in rows}):
        mine = sorted((r for r in rows if r["servers"] == servers), key=lambda r: r["workers"])
        workers = [r["workers"] for r in mine]
        (line,) = ax.plot(
            workers, [r["jobs_per_s"] for r in mine], "o-", label=f"{servers} server(s)"
        )
        ax.plot(workers, [r["linear"] for r in mine], "--", color=line.get_color(), alpha=0.6)
        before = [r for r in mine if "before" in r]
        if before:
            ax.plot(
                [r["workers"] for r in before],
                [r["before"]["jobs_per_s"] for r in before],
                "x:",
                color=line.get_color(),
                alpha=0.4,
            )
    ax.set_xlabel("worker processes (doclane worker -c)")
    ax.set_ylabel("jobs/s")
    compared = " (x dotted: before)" if any("before" in r for r in rows) else ""
    ax.set_title(
        f"Scale-out: {tool_ms:.0f} ms tool, {slots} slot(s) per server\ndashed: linear{compared}"
    )
    ax.set_xscale("log", base=2)
    ticks = sorted({r["workers"] for r in rows})
    ax.set_xticks(ticks, [str(w) for w in ticks])
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--points", default=DEFAULT_POINTS, help="SERVERSxWORKERS, comma-separated."
    )
    parser.add_argument(
        "--server-slots", type=int, default=2, help="Calls a server works on at once."
    )
    parser.add_argument("--tool-ms", type=float, default=200.0, help="The convert tool's time.")
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="About how long each point runs."
    )
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "scale-out.png")
    parser.add_argument(
        "--compare-with", type=Path, help="Another checkout whose doclane runs each point too."
    )
    parser.add_argument("--rounds", type=int, default=1, help="Runs of every point per side.")
    parser.add_argument("--smoke", action="store_true", help="Two tiny points (CI).")
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder (logs).")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-scale-", dir=TOOLS))
    print(f"scratch folder: {scratch}", file=sys.stderr)
    if args.smoke:
        args.points, args.seconds, args.plot = "1x1,2x2", 1.0, scratch / "scale-out.png"
    grid = []
    for spec in args.points.split(","):
        servers, workers = (int(n) for n in spec.strip().lower().split("x"))
        grid.append(
            (servers, workers, min(workers, servers * args.server_slots) * 1000.0 / args.tool_ms)
        )
    sides = [ROOT] if args.compare_with is None else [args.compare_with.resolve(), ROOT]
    runs = [
        Run(servers, workers, linear, checkout=side)
        for _ in range(args.rounds)
        for servers, workers, linear in grid
        for side in sides
    ]
    fakes = [FakeServer(scratch, cache_max_documents=1000) for _ in range(max(g[0] for g in grid))]
    broker = claim_redis_db()
    load_before = load_average()
    try:
        for server in fakes:
            server.start()
        knobs = {
            "delay_s": args.tool_ms / 1000.0,
            "delay_tools": [CONVERT],
            "max_concurrent_calls": args.server_slots,
        }
        for run in runs:
            run_point(run, fakes, knobs=knobs, scratch=scratch, broker=broker, seconds=args.seconds)
            print(
                f"{run.servers}x{run.workers} ({run.checkout}): {run.rate:.1f} jobs/s of"
                f" {run.linear:.0f} linear ({run.ratio:.2f}); conversions per server"
                f" {run.conversions}, at most {run.most_at_once} calls at once on one; per job"
                f" (mean, ms) calls {run.calls_ms:.1f}, in job {run.in_job_ms:.1f}, between"
                f" {run.between_ms:.1f}: the pipeline's own {run.pipeline_ms:.1f}",
                file=sys.stderr,
            )
        rows = summarize(grid, runs, args.compare_with)
        plot(rows, args.server_slots, args.tool_ms, args.plot)
    finally:
        for server in fakes:
            server.stop()
        broker.release()
        if not args.keep and not args.smoke:
            shutil.rmtree(scratch, ignore_errors=True)
    report = {
        "slots": args.server_slots,
        "tool_ms": args.tool_ms,
        "rounds": args.rounds,
        "commit": commit_of(ROOT) or "unknown",
        "load_average": [load_before, load_average()],
        "points": rows,
    }
    if args.compare_with is not None:
        report["compared_with"] = {
            "checkout": str(args.compare_with),
            "commit": commit_of(args.compare_with) or "unknown",
        }
    show(report, args)
    if args.smoke and not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)


def summarize(
    grid: list[tuple[int, int, float]], runs: list[Run], other: Path | None
) -> list[dict[str, Any]]:
    """Per point: this checkout's median over the rounds (and the other's, under "before")."""
    rows = []
    for servers, workers, linear in grid:
        mine = [r for r in runs if (r.servers, r.workers) == (servers, workers)]
        row = {"servers": servers, "workers": workers, **figures(mine, ROOT), "linear": linear}
        if other is not None:
            row["before"] = figures(mine, other.resolve())
            row["after_over_before"] = round(row["jobs_per_s"] / row["before"]["jobs_per_s"], 2)
        rows.append(row)
    return rows


def figures(runs: list[Run], checkout: Path) -> dict[str, Any]:
    side = [r for r in runs if r.checkout == checkout]
    return {
        "jobs": side[0].jobs,
        "succeeded": min(r.succeeded for r in side),  # the worst round: every job, every time
        "seconds": round(statistics.median(r.seconds for r in side), 2),
        "jobs_per_s": round(statistics.median(r.rate for r in side), 2),
        "ratio": round(statistics.median(r.ratio for r in side), 2),
        "rounds_jobs_per_s": [round(r.rate, 2) for r in side],
        "most_at_once": max(r.most_at_once for r in side),
        "rounds_conversions": [r.conversions for r in side],
        # per job, mean ms, medians over the rounds: what the calls took and what was the pipeline's
        "calls_ms": round(statistics.median(r.calls_ms for r in side), 1),
        "in_job_ms": round(statistics.median(r.in_job_ms for r in side), 1),
        "between_ms": round(statistics.median(r.between_ms for r in side), 1),
        "pipeline_ms": round(statistics.median(r.pipeline_ms for r in side), 1),
    }


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def show(report: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(report))
        return
    compared = "compared_with" in report
    print(
        f"tool {args.tool_ms:.0f} ms, {args.server_slots} slot(s) per server, commit"
        f" {report['commit']}, {args.rounds} round(s), load {report['load_average']};"
        f" plot: {args.plot}"
    )
    if compared:
        other = report["compared_with"]
        print(f"before: {other['checkout']} ({other['commit']})")
    head = f"{'servers':>7} {'workers':>7} {'jobs':>5} {'linear':>6}"
    if compared:
        head += f" {'before':>7} {'ratio':>5} {'most':>4}"
    print(f"{head} {'jobs/s':>7} {'ratio':>5} {'most':>4} {'ok':>5}  per job, mean ms")
    for r in report["points"]:
        line = f"{r['servers']:>7} {r['workers']:>7} {r['jobs']:>5} {r['linear']:>6.1f}"
        if compared:
            line += (
                f" {r['before']['jobs_per_s']:>7.2f} {r['before']['ratio']:>5.2f}"
                f" {r['before']['most_at_once']:>4}"
            )
        print(
            f"{line} {r['jobs_per_s']:>7.2f} {r['ratio']:>5.2f} {r['most_at_once']:>4}"
            f" {r['succeeded']:>5}  calls {r['calls_ms']:.1f}, pipeline {r['pipeline_ms']:.1f}"
            f" ({r['between_ms']:.1f} of it between jobs)"
        )


if __name__ == "__main__":
    main()
