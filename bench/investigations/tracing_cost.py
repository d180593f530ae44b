"""What one trace per job costs: the same pipeline with tracing off and on, side by side.

One fake Docling MCP server (tests/fakes) that answers at once, so the pipeline's own work is
all there is to measure; ``doclane worker -c N`` (batches and rounds off: a job at a time) on a
freshly migrated scratch database and a Redis database claimed as the test suite claims its
brokers; ``doclane submit <folder> --wait --json`` of ``--jobs`` small distinct Markdown files.
The two modes differ only in the environment of the worker and of ``doclane submit``:

- ``off``: no ``OTEL_*`` variable (tracing's default: nothing of OpenTelemetry is loaded);
- ``on``: ``OTEL_EXPORTER_OTLP_ENDPOINT`` at a real OTLP/HTTP receiver in this process
  (tests/support/otlp_receiver.py), every job sampled (``always_on``), the SDK's batching
  exporter with its default delay: the submit's root spans, each attempt, its store round trips
  and MCP calls are exported while the jobs run.

Figures per run: throughput (jobs over the time from just before ``doclane submit`` starts to the
last job's ``finished_at``) and the submit command's own wall time until it printed (with
``--wait``, so the whole run; ``--no-wait`` runs are not taken). The modes alternate (off, on,
off, on, ...) for ``--rounds`` rounds, because this kind of machine drifts within minutes; the
report gives each round's pair and the median ratio on / off.

    .venv/bin/python -m bench.investigations.tracing_cost
        [--jobs 500] [--rounds 3] [--concurrency 2]
        [--smoke] [--json]

``--smoke`` makes every count tiny: it proves the bench works, its figures mean nothing.
Figures go to docs/benchmarks.md (*What we learned*).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import (
    DOCLANE,
    FakeServer,
    claim_redis_db,
    print_json,
    process_tree_cpu_s,
    scratch_database,
    start_worker,
    stop_worker,
    worker_env,
    write_documents,
)
from tests.support.otlp_receiver import OtlpReceiver

MODES = ("off", "on")


def _tracing_env(mode: str, receiver: OtlpReceiver) -> dict[str, str]:
    if mode == "off":
        return {}
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_SAMPLER": "always_on",
    }


def one_run(
    mode: str, *, server: FakeServer, receiver: OtlpReceiver, args: argparse.Namespace, run: int
) -> dict[str, Any]:
    broker = claim_redis_db()
    try:
        with (
            scratch_database(f"doclane_bench_tracing_{run}") as db_url,
            tempfile.TemporaryDirectory(prefix="doclane-bench-tracing-") as scratch,
        ):
            folder = Path(scratch) / "docs"
            write_documents(folder, args.jobs, f"{mode}{run}")
            # exactly the mode's tracing settings, whatever this process was started with
            base = worker_env(db_url, broker, server.origin)
            env = {k: v for k, v in base.items() if not k.startswith("OTEL_")}
            env.update(_tracing_env(mode, receiver))
            log = Path(scratch) / "worker.log"
            worker = start_worker(env, log, "--concurrency", str(args.concurrency), "--no-beat")
            spans_before = len(receiver.spans())
            try:
                started = time.time()
                clock = time.monotonic()
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                done = subprocess.run(
                    [DOCLANE, "submit", str(folder), "--wait", "--json"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=3600,
                )
                submit_s = time.monotonic() - clock
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                submit_cpu_s = (after.ru_utime + after.ru_stime) - (
                    children.ru_utime + children.ru_stime
                )
                worker_cpu_s = process_tree_cpu_s(worker.pid)
                if done.returncode != 0:
                    raise SystemExit(f"doclane submit failed ({mode}): {done.stderr[-2000:]}")
                assert json.loads(done.stdout)["ok"]
            finally:
                stop_worker(worker)
            with psycopg.connect(db_url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*), max(extract(epoch FROM finished_at)),"
                    " count(*) FILTER (WHERE trace_context IS NOT NULL)"
                    " FROM jobs WHERE state = 'succeeded'"
                ).fetchone()
            assert row is not None and row[0] == args.jobs, row
            elapsed = float(row[1]) - started
            return {
                "mode": mode,
                "jobs": args.jobs,
                "docs_per_s": round(args.jobs / elapsed, 2),
                "seconds": round(elapsed, 2),
                "submit_wait_s": round(submit_s, 2),
                # CPU per job: the worker's processes (start-up included, the same in both
                # modes but for OpenTelemetry's own imports) and the submitting CLI's
                "worker_cpu_ms_per_job": round(worker_cpu_s * 1000 / args.jobs, 2),
                "submit_cpu_ms_per_job": round(submit_cpu_s * 1000 / args.jobs, 2),
                "jobs_with_trace_context": int(row[2]),
                "spans_received": len(receiver.spans()) - spans_before,
            }
    finally:
        broker.release()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=500, help="Jobs per run.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of (off, on).")
    parser.add_argument("--concurrency", type=int, default=2, help="doclane worker -c.")
    parser.add_argument("--smoke", action="store_true", help="Tiny counts (CI).")
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.rounds = 5, 1
    runs: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with (
        OtlpReceiver().running() as receiver,
        tempfile.TemporaryDirectory(prefix="doclane-bench-fake-") as fake_dir,
    ):
        server = FakeServer(Path(fake_dir)).start()
        try:
            for round_ in range(args.rounds):
                for mode in MODES:
                    run = one_run(mode, server=server, receiver=receiver, args=args, run=len(runs))
                    run["round"] = round_ + 1
                    runs.append(run)
                    if not args.json:
                        print(json.dumps(run))
        finally:
            server.stop()
    ratios = [
        on["docs_per_s"] / off["docs_per_s"] for off, on in zip(runs[::2], runs[1::2], strict=True)
    ]
    cpu_ratios = [
        on["worker_cpu_ms_per_job"] / off["worker_cpu_ms_per_job"]
        for off, on in zip(runs[::2], runs[1::2], strict=True)
    ]
    report = {
        "runs": runs,
        "median_ratio_on_over_off": round(statistics.median(ratios), 3),
        "median_worker_cpu_ratio_on_over_off": round(statistics.median(cpu_ratios), 3),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print_json(report)
    else:
        print(json.dumps({k: v for k, v in report.items() if k != "runs"}))


if __name__ == "__main__":
    main()
