"""Scale-out, simulated (issue 15, figure 8): servers x worker processes against linear.

Fake Docling MCP servers (tests/fakes) whose convert takes a fixed ``--tool-ms`` (200 ms; export
is instant) and which work on at most ``--server-slots`` calls at once (the fake's
``max_concurrent_calls``: a server with that many conversion slots; the others wait their turn).
For each point of a small grid, ``doclane worker -c W`` (batches off) with
``DOCLING_MCP_ORIGIN`` naming S of those servers converts enough jobs to run for a few seconds.

Linear is ``min(W, S x slots) / tool time``: every process busy on a free slot all the time.
Throughput is the jobs over the time from the first claim to the last commit (the database's
clocks; ``doclane submit`` runs before, not timed). The goal is at least 0.9x linear.

    .venv/bin/python bench/scale_out.py [--points 1x1,1x2,...] [--plot docs/scale-out.png]

Each point gets a freshly migrated scratch database and a Redis database claimed as the test
suite claims its brokers. ``--smoke`` (CI) runs two tiny points and plots into the scratch
folder. Everything started is stopped and every scratch database removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from batch_throughput import (  # noqa: E402
    DOCLANE,
    claim_redis_db,
    scratch_database,
    start_worker,
    stop_worker,
    worker_env,
)
from pipeline_overhead import write_documents  # noqa: E402

from pipeline.profiles.docling_mcp import CONVERT  # noqa: E402
from tests.fixtures.brokers import Broker  # noqa: E402
from tests.fixtures.fake_server import FakeServer  # noqa: E402

TOOLS = Path(os.environ.get("DOCLANE_TOOLS_DIR", Path.home() / ".cache" / "doclane"))
DEFAULT_POINTS = "1x1,1x2,1x4,2x4,2x8,4x4,4x8"


@dataclass
class Point:
    servers: int
    workers: int
    jobs: int = 0
    seconds: float = 0.0
    succeeded: int = 0
    linear: float = 0.0

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    @property
    def ratio(self) -> float:
        return self.rate / self.linear if self.linear else 0.0


def run_point(
    point: Point, servers: list[FakeServer], scratch: Path, broker: Broker, seconds: float
) -> None:
    """One grid point: its own database, worker and documents; fills in the point's figures."""
    broker.flush()
    point.jobs = max(6, round(point.linear * seconds))
    folder = scratch / f"docs-{point.servers}x{point.workers}"
    write_documents(folder, point.jobs, f"{point.servers}x{point.workers}")
    with scratch_database(f"doclane_bench_scale_{os.getpid()}") as db_url:
        env = worker_env(
            db_url,
            broker,
            ",".join(s.url for s in servers[: point.servers]),
            DOCLANE_INBOX_DIR=str(scratch / "inbox"),
            DOCLANE_LOG_LEVEL="WARNING",
        )
        log_path = scratch / f"worker-{point.servers}x{point.workers}.log"
        worker = start_worker(
            {**env, "DOCLANE_LOG_LEVEL": "INFO"},
            log_path,
            "--concurrency",
            str(point.workers),
            "--loglevel",
            "INFO",
        )
        try:
            subprocess.run(
                [DOCLANE, "submit", str(folder), "--json"], env=env, check=True, capture_output=True
            )
            wait_finished(db_url, point.jobs, timeout=60 + 10 * seconds)
            with psycopg.connect(db_url) as conn:
                row = conn.execute(
                    "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8,"
                    " count(*) FILTER (WHERE state = 'succeeded') FROM jobs"
                ).fetchone()
            assert row is not None
            point.seconds, point.succeeded = float(row[0] or 0.0), int(row[1])
        finally:
            stop_worker(worker)


def wait_finished(db_url: str, count: int, *, timeout: float) -> None:
    """Until every job is finished (a bench's own wait: polls with a deadline)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(db_url, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL")
            done = row.fetchone()
            if done is not None and done[0] >= count:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"only {done} of {count} jobs finished within {timeout:.0f} s")
            time.sleep(0.2)


def plot(points: list[Point], slots: int, tool_ms: float, path: Path) -> None:
    """Measured throughput against linear, one line per number of servers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for servers in sorted({p.servers for p in points}):
        mine = sorted((p for p in points if p.servers == servers), key=lambda p: p.workers)
        workers = [p.workers for p in mine]
        (line,) = ax.plot(workers, [p.rate for p in mine], "o-", label=f"{servers} server(s)")
        ax.plot(workers, [p.linear for p in mine], "--", color=line.get_color(), alpha=0.6)
    ax.set_xlabel("worker processes (doclane worker -c)")
    ax.set_ylabel("jobs/s")
    ax.set_title(f"Scale-out: {tool_ms:.0f} ms tool, {slots} slot(s) per server (dashed: linear)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(
        sorted({p.workers for p in points}), [str(w) for w in sorted({p.workers for p in points})]
    )
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
    points = []
    for spec in args.points.split(","):
        servers, workers = (int(n) for n in spec.strip().lower().split("x"))
        linear = min(workers, servers * args.server_slots) * 1000.0 / args.tool_ms
        points.append(Point(servers, workers, linear=linear))
    servers = [
        FakeServer(scratch, cache_max_documents=1000) for _ in range(max(p.servers for p in points))
    ]
    broker = claim_redis_db()
    try:
        for server in servers:
            server.start()
            server.configure(
                delay_s=args.tool_ms / 1000.0,
                delay_tools=[CONVERT],
                max_concurrent_calls=args.server_slots,
            )
        for point in points:
            run_point(point, servers, scratch, broker, args.seconds)
            print(
                f"{point.servers}x{point.workers}: {point.rate:.1f} jobs/s of {point.linear:.0f}"
                f" linear ({point.ratio:.2f})",
                file=sys.stderr,
            )
        plot(points, args.server_slots, args.tool_ms, args.plot)
    finally:
        for server in servers:
            server.stop()
        broker.release()
        if not args.keep and not args.smoke:
            shutil.rmtree(scratch, ignore_errors=True)
    show(points, args)
    if args.smoke and not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)


def show(points: list[Point], args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = [
        {
            "servers": p.servers,
            "workers": p.workers,
            "jobs": p.jobs,
            "succeeded": p.succeeded,
            "seconds": round(p.seconds, 2),
            "jobs_per_s": round(p.rate, 2),
            "linear": round(p.linear, 1),
            "ratio": round(p.ratio, 2),
        }
        for p in points
    ]
    if args.json:
        print(json.dumps({"slots": args.server_slots, "tool_ms": args.tool_ms, "points": rows}))
        return
    print(f"tool {args.tool_ms:.0f} ms, {args.server_slots} slot(s) per server; plot: {args.plot}")
    print(
        f"{'servers':>7} {'workers':>7} {'jobs':>5} {'ok':>5} {'s':>6} {'jobs/s':>7} "
        f"{'linear':>6} {'ratio':>5}"
    )
    for r in rows:
        print(
            f"{r['servers']:>7} {r['workers']:>7} {r['jobs']:>5} {r['succeeded']:>5} "
            f"{r['seconds']:>6.2f} {r['jobs_per_s']:>7.2f} {r['linear']:>6.1f} {r['ratio']:>5.2f}"
        )


if __name__ == "__main__":
    main()
