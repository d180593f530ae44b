"""The soak: many small documents through two workers while the services around them fail.

What a week in production would show, compressed: ``--docs`` small Markdown documents (default
100,000) through two ``doclane worker`` nodes against the instant fake docling server (keeping
``--server-cache`` documents between convert and export, 100 as compose.yaml configures
docling-mcp; or, ``--server docling-rs-mcp``, the real docling-rs-mcp over HTTP, profile
``docling-rs``), with a
private Redis (the broker and the breakers) and a private PostgreSQL cluster
(bench/harness/private.py), so that restarting them disturbs no one else on the machine.
Meanwhile, on a schedule:

- worker B is killed with SIGKILL every ``--kill-every`` seconds and started again (worker A,
  which runs the reconciler's beat, is left alone: its RSS over the run is the growth figure);
- Redis is restarted once, losing every message (no persistence), at ``--redis-restart-at``
  (a fraction of the documents finished);
- PostgreSQL is restarted once (``pg_ctl restart -m fast``) at ``--postgres-restart-at``;
- the server is stopped for the breaker's reset and a half (``--breaker-reset``) at
  ``--server-stop-at``, then started again on its port.

Documents are submitted in chunks, keeping at most ``--backlog`` unfinished, so that the
submit-to-result latency is the pipeline's and not a queue of the whole corpus.

Recorded: jobs lost (not succeeded at the end), results doubled, conversions doubled (convert
calls beyond one per document: those the fake server counted; docling-rs-mcp counts nothing, so
there the convert calls in the jobs' trails, which miss a call in flight when its process was
killed), throughput over time and worker RSS over
time (``--plot``), PostgreSQL table and index growth per 100,000 jobs, the reconciler's work
(its ``reconciled:`` lines) and the p50/p99 submit-to-result latency.

    .venv/bin/python -m bench.soak [--docs 100000] [--smoke] [--plot docs/soak-throughput.png]
        [--server fake|docling-rs-mcp] [--server-cache 100]
        [--json] [--kill-every 180] [--redis-restart-at 0.3] [--postgres-restart-at 0.5]
        [--server-stop-at 0.7] [--no-postgres-restart] [--no-faults]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import (
    DOCLANE,
    FakeServer,
    RsServer,
    percentile,
    print_json,
    start_worker,
    stop_worker,
)
from bench.harness.private import PrivatePostgres, PrivateRedis
from bench.harness.processes import children_of, rss_mb

#: The reconciler's summary line (pipeline/reconciler/sweeps.py).
_RECONCILED = re.compile(
    r"reconciled: (\d+) lease\(s\) expired and requeued, (\d+) stale job\(s\), "
    r"(?:(\d+) lost message\(s\), )?(\d+) message\(s\) published, (\d+) publish failure"
)
_LOST_STATES = ("failed", "cancelled")
_UNFINISHED_STATES = ("queued", "running", "retrying")
_TABLES = ("jobs", "results", "job_events", "job_state_transitions", "finished_rollup")
#: The servers a soak can run against, and the profile the workers use with each.
_PROFILES = {"fake": "docling-mcp", "docling-rs-mcp": "docling-rs"}


def say(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Timeline:
    """What the sampler saw, every ``sample_s`` seconds, and when each fault happened."""

    started: float = field(default_factory=time.monotonic)
    samples: list[dict[str, float]] = field(default_factory=list)
    faults: list[tuple[float, str]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.started

    def fault(self, what: str) -> None:
        self.faults.append((self.now(), what))
        say(what)


def tree_rss_mb(pid: int) -> float:
    """RSS of a worker node: its main process and its pool processes."""
    try:
        return rss_mb(pid) + sum(rss_mb(child) for child in children_of(pid))
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def rss_by_process(worker: subprocess.Popen[bytes] | None) -> dict[str, float]:
    """Worker A's main process and each of its children (pool processes, the beat), apart."""
    if worker is None:
        return {}
    try:
        figures = {"rss_a_main": rss_mb(worker.pid)}
        figures |= {f"rss_a_child_{c}": rss_mb(c) for c in children_of(worker.pid)}
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return figures


def counts(db_url: str) -> tuple[int, int]:
    """Jobs ended (``finished_at`` set) and jobs succeeded; (-1, -1) while PostgreSQL is down."""
    try:
        with psycopg.connect(db_url, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE finished_at IS NOT NULL),"
                " count(*) FILTER (WHERE state = 'succeeded') FROM jobs"
            ).fetchone()
    except psycopg.OperationalError:
        return -1, -1
    assert row is not None
    return int(row[0]), int(row[1])


def table_sizes(db_url: str) -> dict[str, dict[str, int]]:
    with psycopg.connect(db_url) as conn:
        return {
            table: {
                "table_bytes": int(row[0]),
                "index_bytes": int(row[1]),
            }
            for table in _TABLES
            if (
                row := conn.execute(
                    "SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass)",
                    (table, table),
                ).fetchone()
            )
            is not None
        }


class Soak:
    """One run: the services, the two workers, the feeder, the sampler and the faults."""

    def __init__(self, args: argparse.Namespace, scratch: Path) -> None:
        self.args = args
        self.scratch = scratch
        self.timeline = Timeline()
        self.redis = PrivateRedis(scratch)
        self.postgres = PrivatePostgres(scratch)
        self.server: FakeServer | RsServer = (
            RsServer(scratch / "rs", root=scratch / "docs")
            if args.server == "docling-rs-mcp"
            else FakeServer(scratch, cache_max_documents=args.server_cache)
        )
        self.env: dict[str, str] = {}
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.submitted = 0
        self.finished = 0
        self.convert_calls = 0
        self.starts = 0
        self.stop = threading.Event()

    # ---- the run --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        a = self.args
        self.redis.start()
        self.postgres.start()
        for folder in (self.scratch / "rs", self.scratch / "docs"):
            folder.mkdir(exist_ok=True)
        self.server.start()
        try:
            self.env = self.environment()
            self.start_node("a", "--concurrency", str(a.concurrency))
            self.start_node("b", "--concurrency", str(a.concurrency), "--no-beat")
            sizes_before = table_sizes(self.postgres.url)
            threads = [threading.Thread(target=f, daemon=True) for f in (self.feed, self.sample)]
            for thread in threads:
                thread.start()
            self.faults()
            self.stop.set()
            for thread in threads:
                thread.join(timeout=60)
            return self.report(sizes_before)
        finally:
            self.stop.set()
            for node in list(self.workers):
                stop_worker(self.workers.pop(node))
            self.server.stop()
            self.postgres.stop()
            self.redis.stop()

    def environment(self) -> dict[str, str]:
        a = self.args
        return {
            **os.environ,
            "DOCLANE_DATABASE_URL": self.postgres.url,
            "DOCLANE_BROKER_URL": self.redis.url,
            "DOCLANE_REDIS_URL": self.redis.url,
            "DOCLING_MCP_ORIGIN": self.server.url,
            "DOCLANE_PROFILE": _PROFILES[a.server],
            "DOCLANE_LOG_LEVEL": "INFO",
            "DOCLANE_BATCH_MAX_DOCS": str(a.batch),
            "DOCLANE_RECONCILE_INTERVAL_S": str(a.reconcile_interval),
            "DOCLANE_LEASE_S": str(a.lease),
            "DOCLANE_BREAKER_RESET_S": str(a.breaker_reset),
        }

    def start_node(self, node: str, *args: str) -> None:
        """Start worker ``node``, a log of its own for each start (any node may reconcile)."""
        self.starts += 1
        log = self.scratch / f"worker-{node}-{self.starts:03d}.log"
        self.workers[node] = start_worker(self.env, log, *args)

    # ---- the feeder and the sampler (threads) ---------------------------------------------
    def feed(self) -> None:
        """Submit chunks while fewer than ``--backlog`` jobs are unfinished."""
        a = self.args
        while self.submitted < a.docs and not self.stop.is_set():
            if self.submitted - max(self.finished, 0) >= a.backlog:
                self.stop.wait(0.5)  # the feeder's pace, not a synchronisation
                continue
            count = min(a.chunk, a.docs - self.submitted)
            folder = self.scratch / "docs" / f"chunk-{self.submitted:07d}"
            write_docs(folder, self.submitted, count)
            done = subprocess.run(
                [DOCLANE, "submit", str(folder), "--json"],
                env=self.env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:  # PostgreSQL restarting: the chunk is tried again
                say(f"submit failed ({done.returncode}), retrying: {done.stderr[-300:]}")
                shutil.rmtree(folder, ignore_errors=True)
                self.stop.wait(2)
                continue
            self.submitted += count  # the files stay: the jobs read them

    def sample(self) -> None:
        while not self.stop.is_set():
            finished, succeeded = counts(self.postgres.url)
            if finished >= 0:
                self.finished = finished
            self.timeline.samples.append(
                {
                    "t": self.timeline.now(),
                    "submitted": self.submitted,
                    "finished": self.finished,
                    "succeeded": succeeded,
                    **{f"rss_{n}": tree_rss_mb(w.pid) for n, w in list(self.workers.items())},
                    **rss_by_process(self.workers.get("a")),
                }
            )
            self.stop.wait(self.args.sample_s)

    # ---- the faults (the main thread) -------------------------------------------------------
    def faults(self) -> None:
        a = self.args
        pending = {} if a.no_faults else {"redis": a.redis_restart_at, "server": a.server_stop_at}
        if a.postgres_restart_at is not None and not a.no_faults:
            pending["postgres"] = a.postgres_restart_at
        next_kill = math.inf if a.no_faults else self.timeline.now() + a.kill_every
        deadline = time.monotonic() + a.timeout
        while self.finished < a.docs:
            if time.monotonic() > deadline:
                say(f"timed out with {self.finished} of {a.docs} finished")
                break
            done = self.finished / a.docs
            for what, at in sorted(pending.items(), key=lambda kv: kv[1]):
                if done >= at:
                    del pending[what]
                    self.inject(what)
            if self.timeline.now() >= next_kill:
                self.inject("kill")
                next_kill = self.timeline.now() + a.kill_every
            time.sleep(0.5)  # the schedule's tick, not a synchronisation
        if not a.no_faults and not any(w.startswith("SIGKILL") for _, w in self.timeline.faults):
            pending["kill"] = 1.0
        for what in pending:  # a run too short for a fault still has it, at its end
            self.inject(what)
        while self.finished < self.submitted and time.monotonic() < deadline:
            time.sleep(1)  # the schedule's tick, not a synchronisation

    def inject(self, what: str) -> None:
        if what == "kill":
            worker = self.workers.pop("b")
            self.timeline.fault("SIGKILL worker b")
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            self.start_node("b", "--concurrency", str(self.args.concurrency), "--no-beat")
        elif what == "redis":
            self.timeline.fault("restart Redis (every message lost)")
            self.redis.restart()
        elif what == "postgres":
            self.timeline.fault("restart PostgreSQL")
            self.postgres.restart()
        elif what == "server":
            self.convert_calls += convert_calls(self.server)
            self.timeline.fault(f"stop the server for {1.5 * self.args.breaker_reset:g} s")
            self.server.stop()
            time.sleep(1.5 * self.args.breaker_reset)  # the outage's length is the fault
            self.server.start()
            self.timeline.fault("server back")

    # ---- the figures ------------------------------------------------------------------------
    def report(self, sizes_before: dict[str, dict[str, int]]) -> dict[str, Any]:
        a = self.args
        self.convert_calls += convert_calls(self.server)
        with psycopg.connect(self.postgres.url) as conn:
            in_trails = convert_calls_in_trails(conn)
            doubles = doubles_in_trails(conn)
            states: dict[str, int] = dict(
                conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()
            )
            results = conn.execute(
                "SELECT count(*), count(DISTINCT (job_id, format)) FROM results"
            ).fetchone()
            latencies = [
                float(r[0])
                for r in conn.execute(
                    "SELECT extract(epoch FROM finished_at - created_at) FROM jobs"
                    " WHERE state = 'succeeded'"
                )
            ]
        assert results is not None
        sizes_after = table_sizes(self.postgres.url)
        jobs = sum(states.values())
        per_100k = 100_000 / max(jobs, 1)
        return {
            "docs": a.docs,
            "jobs": jobs,
            "states": states,
            "submitted": self.submitted,
            # Ended in another state than succeeded, or submitted and never a row.
            "jobs_lost": self.submitted - jobs + sum(states.get(s, 0) for s in _LOST_STATES),
            "unfinished": sum(states.get(s, 0) for s in _UNFINISHED_STATES),
            "results_doubled": int(results[0]) - int(results[1]),
            "server": a.server,
            "server_cache": a.server_cache if a.server == "fake" else None,
            "conversions_doubled": (
                self.convert_calls if isinstance(self.server, FakeServer) else in_trails
            )
            - jobs,
            "convert_calls": self.convert_calls,
            "convert_calls_in_trails": in_trails,
            "doubles_in_trails": doubles,
            "latency_s": {
                "p50": percentile(latencies, 0.5),
                "p99": percentile(latencies, 0.99),
                "max": max(latencies, default=0.0),
            },
            "rss_mb": rss_figures(self.timeline.samples, per_100k),
            "postgres_growth_mb_per_100k": {
                table: {
                    kind: (sizes_after[table][kind] - sizes_before[table][kind])
                    * per_100k
                    / 1024**2
                    for kind in ("table_bytes", "index_bytes")
                }
                for table in sizes_after
            },
            "reconciler": reconciler_work(sorted(self.scratch.glob("worker-*.log"))),
            "faults": [{"t": t, "what": what} for t, what in self.timeline.faults],
            "duration_s": self.timeline.now(),
            "samples": self.timeline.samples,
        }


def write_docs(folder: Path, first: int, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(first, first + count):
        (folder / f"doc-{n:07d}.md").write_text(f"# Document {n}\n\nA paragraph of document {n}.\n")


def convert_calls(server: FakeServer | RsServer) -> int:
    """Convert calls the fake server answered since it started (its counters end with it);
    docling-rs-mcp counts nothing (0)."""
    if not isinstance(server, FakeServer):
        return 0
    by_tool = server.stats()["requests_by_tool"]
    return sum(int(n) for tool, n in by_tool.items() if tool.startswith("convert"))


#: A call whose connection was refused (the server stopped) never reached the server.
_NEVER_SENT = "coalesce(detail->>'message', '') LIKE '%ConnectError%'"


def convert_calls_in_trails(conn: psycopg.Connection[Any]) -> int:
    """Convert calls the jobs' trails record that may have reached the server, answered or not
    (a refused connection left out; a call in flight when its process was killed is in no
    trail)."""
    row = conn.execute(
        "SELECT count(*) FROM job_events WHERE kind = 'mcp_call' AND tool LIKE 'convert%'"
        f" AND NOT {_NEVER_SENT}"
    ).fetchone()
    return int(row[0]) if row is not None else 0


def doubles_in_trails(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """The trails of the jobs that were converted more than once, told in short (their calls
    and state changes in order: ``convert ok, export E302, retrying E302, ...``), counted by
    story: what sent each job back to the server."""
    rows = conn.execute(
        f"""
        SELECT e.job_id, e.kind, e.tool, e.outcome, e.error_code, e.to_state,
               coalesce(e.detail->>'message', '') LIKE '%ConnectError%'
        FROM job_events e
        WHERE e.job_id IN (
            SELECT job_id FROM job_events
            WHERE kind = 'mcp_call' AND tool LIKE 'convert%' AND NOT {_NEVER_SENT}
            GROUP BY job_id HAVING count(*) > 1
        ) AND e.kind IN ('mcp_call', 'state_change')
        ORDER BY e.job_id, e.id
        """
    ).fetchall()
    stories: dict[Any, list[str]] = {}
    for job_id, kind, tool, outcome, code, to_state, refused in rows:
        if kind == "mcp_call":
            step = "convert" if str(tool).startswith("convert") else "export"
            told = f"{step} refused" if refused else f"{step} {code or outcome}"
        elif to_state in ("running", "succeeded"):
            continue
        elif to_state == "queued" and job_id not in stories:
            continue  # the submission
        else:
            told = f"{to_state} {code}" if code else str(to_state)
        stories.setdefault(job_id, []).append(told)
    counted: dict[str, int] = {}
    for story in stories.values():
        key = ", ".join(story)
        counted[key] = counted.get(key, 0) + 1
    return dict(sorted(counted.items(), key=lambda kv: -kv[1]))


def rss_figures(samples: list[dict[str, float]], per_100k: float) -> dict[str, float]:
    """Worker A's RSS (never killed): after the first tenth of the run, at the end, the growth
    between, and that growth scaled to 100,000 jobs."""
    series = [s for s in samples if s.get("rss_a")]
    if not series:
        return {}
    last = series[-1]
    tenth = next((s for s in series if s["finished"] >= last["finished"] / 10), series[0])
    jobs_between = max(last["finished"] - tenth["finished"], 1)
    growth = last["rss_a"] - tenth["rss_a"]
    return {
        "a_after_tenth": tenth["rss_a"],
        "a_at_end": last["rss_a"],
        "a_growth": growth,
        "a_growth_per_100k": growth * 100_000 / jobs_between,
        "b_max": max((s.get("rss_b", 0.0) for s in samples), default=0.0),
    }


def reconciler_work(logs: list[Path]) -> dict[str, int]:
    """The reconciler's passes that changed something, summed over every worker's logs."""
    totals = {"passes_that_changed": 0, "requeued": 0, "stale": 0, "lost": 0, "published": 0,
              "failed": 0}  # fmt: skip
    text = "".join(log.read_text(errors="replace") for log in logs)
    for match in _RECONCILED.finditer(text):
        requeued, stale, lost, published, failed = (int(g or 0) for g in match.groups())
        totals["passes_that_changed"] += 1
        totals["requeued"] += requeued
        totals["stale"] += stale
        totals["lost"] += lost
        totals["published"] += published
        totals["failed"] += failed
    return totals


def plot(report: dict[str, Any], path: Path) -> None:
    """Throughput and worker RSS over time, the faults marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = report["samples"]
    t = [s["t"] / 60 for s in samples]
    rate = [0.0] + [
        max(b["finished"] - a["finished"], 0) / max(b["t"] - a["t"], 1e-9)
        for a, b in itertools.pairwise(samples)
    ]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    top.plot(t, rate, lw=0.8)
    top.set_ylabel("jobs finished / s")
    server = "the fake server" if report["server"] == "fake" else report["server"]
    top.set_title(f"soak: {report['jobs']} documents, two workers, {server}")
    for node, colour in (("a", "tab:blue"), ("b", "tab:orange")):
        bottom.plot(t, [s.get(f"rss_{node}", float("nan")) for s in samples], lw=0.8,
                    color=colour, label=f"worker {node}")  # fmt: skip
    bottom.set_ylabel("worker RSS (MB)")
    bottom.set_xlabel("minutes")
    bottom.legend(loc="upper left")
    for fault in report["faults"]:
        for axis in (top, bottom):
            axis.axvline(fault["t"] / 60, color="grey", lw=0.5, ls=":")
        if not fault["what"].startswith("SIGKILL"):
            top.annotate(fault["what"], (fault["t"] / 60, 0), fontsize=7, rotation=90)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--docs", type=int, default=100_000)
    add("--server", choices=sorted(_PROFILES), default="fake",
        help="the instant fake docling server, or docling-rs-mcp over HTTP")  # fmt: skip
    add("--smoke", action="store_true", help="300 documents, faults every 20 s (CI)")
    add("--concurrency", type=int, default=2, help="pool processes per worker")
    add("--server-cache", type=int, default=100,
        help="the fake's document cache, as compose.yaml sets docling-mcp's "
        "(DOCLING_MCP_CACHE_MAX_DOCUMENTS); 10 is docling-mcp's own default")  # fmt: skip
    add("--batch", type=int, default=1, help="DOCLANE_BATCH_MAX_DOCS")
    add("--chunk", type=int, default=1000, help="documents per doclane submit")
    add("--backlog", type=int, default=2000, help="most jobs unfinished at once")
    add("--kill-every", type=float, default=180.0, help="seconds between SIGKILLs of worker b")
    add("--redis-restart-at", type=float, default=0.3)
    add("--postgres-restart-at", type=float, default=0.5)
    add("--no-postgres-restart", action="store_true")
    add("--no-faults", action="store_true",
        help="no SIGKILL, no restart, no outage: the workers' steady state alone")  # fmt: skip
    add("--server-stop-at", type=float, default=0.7)
    add("--breaker-reset", type=float, default=30.0, help="DOCLANE_BREAKER_RESET_S")
    add("--reconcile-interval", type=float, default=30.0)
    add("--lease", type=float, default=60.0)
    add("--sample-s", type=float, default=5.0)
    add("--timeout", type=float, default=6 * 3600.0, help="seconds for the whole run")
    add("--plot", type=Path)
    add("--json", action="store_true")
    add("--keep", action="store_true", help="keep the scratch folder (logs)")
    args = parser.parse_args()
    if args.smoke:
        args.docs, args.chunk, args.backlog, args.kill_every = 300, 50, 100, 20.0
        args.breaker_reset, args.reconcile_interval = 4.0, 2.0
        args.lease, args.sample_s, args.timeout = 10.0, 1.0, 240.0
    if args.no_postgres_restart:
        args.postgres_restart_at = None
    return args


def main() -> None:
    args = arguments()
    scratch = Path(tempfile.mkdtemp(prefix="doclane-soak-"))
    scratch.chmod(0o755)  # the private PostgreSQL runs as the postgres user
    try:
        report = Soak(args, scratch).run()
        if args.plot:
            plot(report, args.plot)
    finally:
        if args.keep:
            say(f"scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print_json(report)
    else:
        shown = {k: v for k, v in report.items() if k != "samples"}
        for key, value in shown.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
