"""What the pipeline adds on top of an instant tool (docs/benchmarks.md, its section of that name).

One fake Docling MCP server (tests/fakes) that answers at once; in one run, alternating:

1. ``pairs``: doclane's own MCP client calling convert then export (the pipeline profile's two
   calls, with the same output checks) sequentially, ``--pairs`` times: the rate a single loop
   of client calls reaches against this server.
2. ``c<N>``: ``doclane worker -c N`` (batches off: ``DOCLANE_BATCH_MAX_DOCS=1``; rounds of
   ``--round-docs`` documents, ``DOCLANE_ROUND_MAX_DOCS``, 1 being a job at a time) on a freshly
   migrated scratch database and a Redis database claimed as the test suite claims its
   brokers; ``doclane submit <folder> --wait --json`` of ``--jobs`` small distinct Markdown
   files. Throughput is the jobs over the time from just before ``doclane submit`` starts to
   the last job's ``finished_at``.
   Then, on the same worker, ``--latency-jobs`` jobs submitted one at a time (enqueue and
   publish in this process, then wait for the job to finish): the per-job overhead is
   ``finished_at - created_at`` (submit to result committed, both by the database's clock) minus
   the job's MCP calls as the worker's client timed them (``job_events``): what the pipeline
   costs a lone job on top of the calls themselves. In the throughput run, the database's
   commits per job (``pg_stat_database.xact_commit``) and each worker process's time per
   document beyond a client pair's (``c / rate - 1 / pairs``: what the pipeline adds to a
   document when many are in flight) are reported too, and how long the broker then takes to
   drain (the messages still waiting when the last job ended, each finding its job taken by a
   round; the worker's and PostgreSQL's CPU per job are given with that drain too).

The order is pairs, c1, pairs, c2, pairs, c4, pairs, so each pipeline figure sits between two
client figures taken minutes apart on the same machine; its ratio uses their mean. This kind of
VM drifts by a quarter within minutes, so ``--rounds N`` repeats the sequence and reports each
-c's median ratio; ``--compare-with <checkout>`` runs that checkout's worker and submit (its
code first on ``PYTHONPATH``; the client loop stays this checkout's) right after ours at every
step, for before/after figures taken side by side.

    .venv/bin/python -m bench.pipeline_overhead [--jobs 1000] [--concurrency 1,2,4] [--smoke]

``--smoke`` (what CI runs) makes every count tiny: it proves the bench works, its figures mean
nothing. ``--profile-worker`` samples the worker's main and pool processes with py-spy during
the throughput run (py-spy on PATH or beside the interpreter) and leaves their collapsed stacks
(``py-spy --format raw``, one file per process) in the scratch folder, which is then kept.
Everything started is stopped and every scratch database removed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench.harness import (
    DOCLANE,
    TOOLS,
    Broker,
    FakeServer,
    claim_redis_db,
    percentile,
    process_cpu_s,
    scratch_database,
    start_worker,
    stop_worker,
    worker_env,
    write_documents,
)
from bench.harness.conversions import convert_pair, ignore
from bench.harness.processes import cpu_by_part, per_document_ms
from bench.harness.timeline import job_timeline
from pipeline.jobs.request import SubmissionRequest
from pipeline.mcp.client import McpClient
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from pipeline.submission.intake import enqueue


# ---- the client loop -------------------------------------------------------------------------
@dataclass
class PairsRun:
    rate: float  # pairs per second
    cpu_ms: dict[str, float]  # per pair: this process (the client), the server


def client_pairs(url: str, files: list[Path], server_pid: int) -> PairsRun:
    """Sequential convert+export pairs through doclane's client."""
    with McpClient(url) as client:
        client.initialize()  # the handshake is not part of the figure
        client.tools()
        server_cpu = process_cpu_s(server_pid)
        own_cpu = time.process_time()
        started = time.perf_counter()
        for path in files:
            convert_pair(client, path, ignore)
        elapsed = time.perf_counter() - started
        cpu = {
            "client": (time.process_time() - own_cpu) / len(files) * 1000,
            "server": (process_cpu_s(server_pid) - server_cpu) / len(files) * 1000,
        }
        return PairsRun(len(files) / elapsed, cpu)


# ---- the pipeline ----------------------------------------------------------------------------
@dataclass
class PipelineRun:
    concurrency: int
    jobs: int
    #: DOCLANE_ROUND_MAX_DOCS (1: a job at a time).
    round_docs: int = 1
    #: Commits of the scratch database during the throughput run (all clients).
    commits: int = 0
    #: Whose worker and submit ran: "doclane" (this checkout) or the compared checkout's name.
    label: str = "doclane"
    seconds: float = 0.0
    succeeded: int = 0
    cpu_ms: dict[str, float] = field(default_factory=dict)  # per job, by process
    overhead_ms: list[float] = field(default_factory=list)  # lone jobs, calls subtracted
    latency_ms: list[float] = field(default_factory=list)  # lone jobs, submit to committed
    calls_ms: list[float] = field(default_factory=list)  # lone jobs, their MCP calls
    #: From just before ``doclane submit`` started to the first claim: the workers' wait.
    head_s: float = 0.0
    #: Throughput run: each job from its claim to its commit, and each pool process's gap
    #: from one job's commit to its next claim (Celery's hand-off, the claim).
    in_job_ms: list[float] = field(default_factory=list)
    between_ms: list[float] = field(default_factory=list)
    #: From ``doclane submit`` returning (every job ended) to the broker's job queues empty:
    #: the messages still waiting then, each of which finds its job taken (CPU ``*_drained``).
    drain_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def pipeline_run(
    concurrency: int,
    folder: Path,
    lone: list[Path],
    *,
    server: FakeServer,
    scratch: Path,
    broker: Broker,
    profile_worker: bool,
    checkout: Path | None = None,
    round_docs: int = 1,
    server_concurrency: str = "2",
) -> PipelineRun:
    """``checkout``: run another checkout's worker and submit (its code first on the path)."""
    broker.flush()
    label = checkout.name if checkout is not None else "doclane"
    run = PipelineRun(concurrency, len(list(folder.iterdir())), label=label, round_docs=round_docs)
    with scratch_database(f"doclane_bench_overhead_{os.getpid()}") as db_url:
        env = worker_env(
            db_url,
            broker,
            server.url,
            DOCLANE_SERVER_CACHE_DIR=str(server.cache_dir),
            DOCLANE_INBOX_DIR=str(scratch / "inbox"),
            DOCLANE_ROUND_MAX_DOCS=str(round_docs),
            DOCLANE_SERVER_CONCURRENCY=server_concurrency,
        )
        if checkout is not None:
            env["PYTHONPATH"] = str(checkout)
        log_path = scratch / f"worker-{label}-c{concurrency}-n{round_docs}.log"
        worker = start_worker(env, log_path, "--concurrency", str(concurrency))
        spies: list[subprocess.Popen[bytes]] = []
        try:
            if profile_worker:
                spies = start_spies(worker.pid, scratch / f"c{concurrency}")
            cpu = cpu_by_part(worker.pid, server.pid)
            commits = database_commits(db_url)
            started = time.time()
            done = subprocess.run(
                [DOCLANE, "submit", str(folder), "--wait", "--json", "--timeout", "3600"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if not done.stdout.strip():
                raise SystemExit(f"doclane submit printed nothing: {done.stderr[-2000:]}")
            ms = per_document_ms(cpu, cpu_by_part(worker.pid, server.pid), run.jobs)
            run.cpu_ms = {
                "submit": ms["reaped"],
                "server": ms["server"],
                "worker": ms["pool"] + ms["main"],
                "worker_main": ms["main"],
                "postgres": ms["postgres"],
                "redis": ms["redis"],
            }
            run.commits = database_commits(db_url) - commits
            returned = time.time()
            wait_until_drained(broker)
            run.drain_s = time.time() - returned
            drained = per_document_ms(cpu, cpu_by_part(worker.pid, server.pid), run.jobs)
            run.cpu_ms["worker_drained"] = drained["pool"] + drained["main"]
            run.cpu_ms["postgres_drained"] = drained["postgres"]
            for spy in spies:
                spy.send_signal(2)  # SIGINT: py-spy writes its stacks and exits
            with psycopg.connect(db_url) as conn:
                first, last, run.succeeded = conn.execute(
                    "SELECT extract(epoch FROM min(started_at))::float8,"
                    " extract(epoch FROM max(finished_at))::float8,"
                    " count(*) FILTER (WHERE state = 'succeeded') FROM jobs"
                ).fetchone() or (None, None, 0)
                run.in_job_ms, run.between_ms = job_timeline(conn)
            run.seconds = float(last) - started if last is not None else 0.0
            run.head_s = float(first) - started if first is not None else 0.0
            lone_jobs(run, lone, env, db_url)
        finally:
            for spy in spies:
                spy.wait()
            stop_worker(worker)
    return run


def wait_until_drained(broker: Broker, timeout_s: float = 120.0) -> None:
    """Until no message waits in the broker's job queues (every priority level's list)."""
    client = redis.Redis.from_url(broker.url)
    deadline = time.monotonic() + timeout_s
    try:
        while True:  # a bench's own wait: at most timeout_s, then it says so
            lists = [k for k in client.keys("doclane.*") if client.type(k) == b"list"]
            if sum(int(client.llen(k)) for k in lists) == 0:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"the broker still held messages after {timeout_s:.0f} s")
            time.sleep(0.005)
    finally:
        client.close()


def database_commits(db_url: str) -> int:
    """The scratch database's commits so far (this query's own among them)."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def lone_jobs(run: PipelineRun, files: list[Path], env: dict[str, str], db_url: str) -> None:
    """One job at a time through the same worker: submit, wait for the commit, next."""
    from workers.app import create_app
    from workers.publisher import CeleryPublisher

    saved = dict(os.environ)
    os.environ.update(env)  # the settings below read the worker's environment
    app = create_app(read_settings())
    store = JobStore(read_settings().store)
    try:
        publisher = CeleryPublisher(app)
        for path in files:
            submission = enqueue(SubmissionRequest([str(path)]), publisher=publisher, store=store)
            if len(submission.job_ids) != 1:
                raise SystemExit(f"lone job {path} was not submitted: {submission.to_dict()}")
            (job_id,) = submission.job_ids
            deadline = time.monotonic() + 60
            while True:  # a bench's own wait: at most 60 s, then it says so
                job = store.reads.get_job(job_id)
                if job is not None and job.state.terminal:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"lone job {job_id} did not finish within 60 s")
                time.sleep(0.002)
        with psycopg.connect(db_url) as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM j.finished_at - j.created_at)::float8 * 1000,"
                " coalesce(sum(e.duration_ms), 0)"
                " FROM jobs j LEFT JOIN job_events e ON e.job_id = j.id AND e.kind = 'mcp_call'"
                " WHERE j.source_uri LIKE '%%/lone-%%' AND j.state = 'succeeded'"
                " GROUP BY j.id"
            ).fetchall()
    finally:
        store.close()
        app.close()
        os.environ.clear()
        os.environ.update(saved)
    for latency, calls in rows:
        run.latency_ms.append(float(latency))
        run.calls_ms.append(float(calls))
        run.overhead_ms.append(float(latency) - float(calls))


def start_spies(worker_pid: int, prefix: Path) -> list[subprocess.Popen[bytes]]:
    """py-spy on the worker's main process and each pool process (collapsed stacks, text)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    children = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    spies = []
    for pid in [str(worker_pid), *children]:
        out = f"{prefix}-pid{pid}.txt"
        spies.append(
            subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    pid,
                    "--gil",
                    "--rate",
                    "250",
                    "--format",
                    "raw",
                    "-o",
                    out,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return spies


# ---- the run ---------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="Jobs per throughput run.")
    parser.add_argument("--pairs", type=int, default=1000, help="Client pairs per client run.")
    parser.add_argument("--latency-jobs", type=int, default=100, help="Lone jobs per run.")
    parser.add_argument("--concurrency", default="1,2,4", help="doclane worker -c, in turn.")
    parser.add_argument(
        "--rounds", type=int, default=1, help="Repeat the whole sequence; medians per -c."
    )
    parser.add_argument(
        "--compare-with",
        type=Path,
        default=None,
        help="Another checkout: its worker and submit run after ours at each -c (A B A B).",
    )
    parser.add_argument(
        "--round-docs", default="1", help="DOCLANE_ROUND_MAX_DOCS of the runs, in turn (1,8,32)."
    )
    parser.add_argument(
        "--server-concurrency", default="2", help="DOCLANE_SERVER_CONCURRENCY of a round."
    )
    parser.add_argument("--smoke", action="store_true", help="Tiny counts (CI).")
    parser.add_argument("--profile-worker", action="store_true", help="py-spy the pool.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder (logs).")
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.pairs, args.latency_jobs, args.concurrency = 12, 20, 3, "1"
        args.round_docs = "1,4"
    return args


def main() -> None:
    args = parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    round_docs = [int(n) for n in args.round_docs.split(",") if n.strip()]
    checkouts: list[Path | None] = [None]
    if args.compare_with is not None:
        checkouts.append(args.compare_with.resolve())
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-overhead-", dir=TOOLS))
    print(f"scratch folder: {scratch}", file=sys.stderr)
    keep = args.keep or args.profile_worker
    server = FakeServer(scratch, cache_max_documents=max(args.jobs, args.pairs) + 100)
    broker = claim_redis_db()
    pairs: list[PairsRun] = []
    runs: list[PipelineRun] = []
    try:
        server.start()
        pair_files = write_documents(scratch / "pairs", args.pairs, "pair")
        client_pairs(server.url, pair_files[:200], server.pid)  # warm-up: imports, connections
        pairs.append(client_pairs(server.url, pair_files, server.pid))
        print(f"pairs: {pairs[-1].rate:.1f}/s", file=sys.stderr)
        for round_ in range(args.rounds):
            for c, n, checkout in itertools.product(concurrencies, round_docs, checkouts):
                tag = f"r{round_}-c{c}-n{n}-{checkout.name if checkout else 'doclane'}"
                folder = scratch / f"jobs-{tag}"
                write_documents(folder, args.jobs, tag)
                lone = write_documents(
                    scratch / f"lone-{tag}", args.latency_jobs, f"lone-{tag}"
                )  # contents of their own: a lone job must not be deduplicated
                lone = [p.rename(p.with_name(f"lone-{p.name}")) for p in lone]
                runs.append(
                    pipeline_run(
                        c,
                        folder,
                        lone,
                        server=server,
                        scratch=scratch,
                        broker=broker,
                        profile_worker=args.profile_worker,
                        checkout=checkout,
                        round_docs=n,
                        server_concurrency=args.server_concurrency,
                    )
                )
                print(f"{tag}: {runs[-1].rate:.1f} jobs/s", file=sys.stderr)
                pairs.append(client_pairs(server.url, pair_files, server.pid))
                print(f"pairs: {pairs[-1].rate:.1f}/s", file=sys.stderr)
    finally:
        server.stop()
        broker.release()
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    show(args, pairs, runs)


def show(args: argparse.Namespace, pairs: list[PairsRun], runs: list[PipelineRun]) -> None:
    rows: list[dict[str, Any]] = []
    for n, run in enumerate(runs):
        around = statistics.mean(p.rate for p in pairs[n : n + 2])
        rows.append(
            {
                "label": run.label,
                "concurrency": run.concurrency,
                "round_docs": run.round_docs,
                "jobs": run.jobs,
                "succeeded": run.succeeded,
                "seconds": round(run.seconds, 2),
                "jobs_per_s": round(run.rate, 1),
                "pairs_per_s_around": round(around, 1),
                "ratio": round(run.rate / around, 2) if around else None,
                "head_s": round(run.head_s, 2),
                "in_job_ms_p50": round(percentile(run.in_job_ms, 0.5), 1),
                "between_jobs_ms_p50": round(percentile(run.between_ms, 0.5), 1),
                "lone_jobs": len(run.latency_ms),
                "latency_ms_p50": round(percentile(run.latency_ms, 0.5), 1),
                "overhead_ms_p50": round(percentile(run.overhead_ms, 0.5), 1),
                "overhead_ms_p95": round(percentile(run.overhead_ms, 0.95), 1),
                "calls_ms_p50": round(percentile(run.calls_ms, 0.5), 1),
                "cpu_ms_per_job": {k: round(v, 2) for k, v in run.cpu_ms.items()},
                "commits_per_job": round(run.commits / run.jobs, 2) if run.jobs else None,
                # a worker process's time per document, beyond a client pair's time
                "added_ms_per_doc": round((run.concurrency / run.rate - 1 / around) * 1000, 2)
                if run.rate and around
                else None,
                "in_job_ms_p95": round(percentile(run.in_job_ms, 0.95), 1),
                "drain_s": round(run.drain_s, 2),
            }
        )
    client = [
        {"per_s": round(p.rate, 1), **{k: round(v, 2) for k, v in p.cpu_ms.items()}} for p in pairs
    ]
    summary = medians(rows)
    if args.json:
        print(json.dumps({"pairs": client, "runs": rows, "medians": summary}))
        return
    print("client pairs/s, in run order: " + ", ".join(f"{p.rate:.1f}" for p in pairs))
    print(
        "client CPU ms per pair (client, server): "
        + ", ".join(f"({p.cpu_ms['client']:.2f}, {p.cpu_ms['server']:.2f})" for p in pairs)
    )
    print(
        f"{'who':>8} {'-c':>3} {'N':>3} {'jobs':>5} {'ok':>5} {'s':>6} {'jobs/s':>7} "
        f"{'pairs/s':>7} "
        f"{'ratio':>5} {'lat p50':>7} {'ovh p50':>7} {'ovh p95':>7} {'calls':>6}  (ms; lone jobs)"
        "  CPU ms/job: worker, submit, server, postgres, redis"
    )
    for row in rows:
        cpu = row["cpu_ms_per_job"]
        print(
            f"{row['label'][:8]:>8} {row['concurrency']:>3} {row['round_docs']:>3} "
            f"{row['jobs']:>5} {row['succeeded']:>5} "
            f"{row['seconds']:>6.1f} {row['jobs_per_s']:>7.1f} {row['pairs_per_s_around']:>7.1f} "
            f"{row['ratio']:>5.2f} {row['latency_ms_p50']:>7.1f} {row['overhead_ms_p50']:>7.1f} "
            f"{row['overhead_ms_p95']:>7.1f} {row['calls_ms_p50']:>6.1f}"
            f"  {cpu['worker']:.2f}, {cpu['submit']:.2f}, {cpu['server']:.2f},"
            f" {cpu['postgres']:.2f}, {cpu['redis']:.2f}"
            f"  | head {row['head_s']:.2f} s, in job {row['in_job_ms_p50']:.1f}"
            f"/{row['in_job_ms_p95']:.1f} ms (p50/p95),"
            f" between {row['between_jobs_ms_p50']:.1f} ms, commits/job {row['commits_per_job']},"
            f" added ms/doc {row['added_ms_per_doc']}, then {row['drain_s']:.2f} s to drain the"
            f" broker (worker, postgres CPU ms/job with it: {cpu['worker_drained']:.2f},"
            f" {cpu['postgres_drained']:.2f})"
        )
    if args.rounds > 1 or args.compare_with is not None:
        print("medians over rounds (ratio; jobs/s):")
        for item in summary:
            print(
                f"  {item['label']:>12} -c {item['concurrency']} N {item['round_docs']}:"
                f" ratio {item['ratio']:.2f}"
                f" (rounds {', '.join(f'{r:.2f}' for r in item['ratios'])});"
                f" {item['jobs_per_s']:.1f} jobs/s"
            )


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (who, -c, N): the median ratio and rate over the rounds, and each round's ratio."""
    grouped: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["label"], row["concurrency"], row["round_docs"])
        grouped.setdefault(key, []).append(row)
    return [
        {
            "label": label,
            "concurrency": c,
            "round_docs": n,
            "ratio": round(statistics.median(r["ratio"] for r in group), 2),
            "ratios": [r["ratio"] for r in group],
            "jobs_per_s": round(statistics.median(r["jobs_per_s"] for r in group), 1),
        }
        for (label, c, n), group in grouped.items()
    ]


if __name__ == "__main__":
    main()
