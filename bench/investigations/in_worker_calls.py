"""Are the same MCP calls slower inside a worker? (docs/benchmarks.md, *What we learned*)

A first measure of the pipeline's overhead saw each job's MCP calls take 596 ms on average
inside ``doclane worker -c 1`` against 544 ms made directly by doclane's client, on the same
corpus and server, in two runs minutes apart. This bench
makes the comparison paired and side by side, on real documents (``bench/corpus.py``'s corpus,
a few of each format) and one local docling-mcp 3.3.0, restarted with an empty cache before
every mode so that no conversion is a cache hit:

- ``direct``: doclane's client converts and exports each document in turn (as
  ``bench/batch_throughput.py`` does), each call timed by the client's own record;
- ``worker``: ``doclane worker -c 1`` (batches off) converts the same documents, submitted at
  once; each call's time is the worker's client's record, read from the job's trail.

Modes alternate (direct, worker, direct, worker, ...). For each document and tool, the worker's
time is divided by the direct time of the same round: the median of these ratios says whether a
call is slower in a worker, whatever the mix of documents. Beside it: the CPU seconds the server
and the worker's processes used, per document, which tell whether the worker takes CPU from the
server (2 cores), and the machine's load.

    .venv/bin/python -m bench.investigations.in_worker_calls [--per-format 4] [--rounds 2] [--smoke]
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
from pathlib import Path
from typing import Any

import psycopg

from bench import corpus as corpus_module
from bench.harness import (
    DOCLANE,
    DOCLING_MCP_BIN,
    TOOLS,
    Broker,
    DoclingServer,
    claim_redis_db,
    percentile,
    process_tree_cpu_s,
    scratch_database,
    start_worker,
    stop_worker,
    worker_env,
)
from errors import PipelineError
from pipeline.mcp.client import McpClient
from pipeline.profiles.base import McpCallRecord, ToolCalls, require_str, structured
from pipeline.profiles.docling_mcp import CONVERT, EXPORT_MARKDOWN
from pipeline.settings.tree import read_settings
from pipeline.sources.local import validate_file

#: (document name, tool) -> milliseconds of that call
Times = dict[tuple[str, str], float]


def server_cpu_s(server: DoclingServer) -> float:
    assert server.proc is not None
    return process_tree_cpu_s(server.proc.pid)


def direct(files: list[Path], server: DoclingServer) -> tuple[Times, dict[str, float]]:
    times: Times = {}
    current = ""

    def keep(record: McpCallRecord) -> None:
        times[(current, record.tool)] = record.duration_s * 1000

    with McpClient(server.url) as client:
        client.initialize()
        client.tools()
        cpu = server_cpu_s(server)
        own = time.process_time()
        started = time.monotonic()
        for path in files:
            current = path.name
            size = path.stat().st_size
            try:
                calls = ToolCalls(client, keep)
                result = calls.call(
                    CONVERT, {"source": str(path)}, stage="convert", size_bytes=size
                )
                key = require_str(structured(result, CONVERT), "document_key", CONVERT)
                calls.call(EXPORT_MARKDOWN, {"document_key": key}, stage="export", size_bytes=size)
            except PipelineError:
                continue
        usage = {
            "seconds": time.monotonic() - started,
            "server_cpu_s": server_cpu_s(server) - cpu,
            "client_cpu_s": time.process_time() - own,
        }
    return times, usage


def worker(
    folder: Path, server: DoclingServer, scratch: Path, broker: Broker, n: int
) -> tuple[Times, dict[str, float]]:
    broker.flush()
    with scratch_database(f"doclane_bench_inworker_{os.getpid()}") as db_url:
        env = worker_env(
            db_url,
            broker,
            server.url,
            DOCLANE_SERVER_CACHE_DIR=str(server.cache_dir),
            DOCLANE_INBOX_DIR=str(scratch / "inbox"),
        )
        log_path = scratch / f"worker-{n}.log"
        proc = start_worker(env, log_path, "--concurrency", "1")
        try:
            cpu, worker_cpu = server_cpu_s(server), process_tree_cpu_s(proc.pid)
            started = time.monotonic()
            subprocess.run(
                [DOCLANE, "submit", str(folder), "--wait", "--json", "--timeout", "1800"],
                env=env,
                capture_output=True,
                check=False,
            )
            usage = {
                "seconds": time.monotonic() - started,
                "server_cpu_s": server_cpu_s(server) - cpu,
                "worker_cpu_s": process_tree_cpu_s(proc.pid) - worker_cpu,
            }
            with psycopg.connect(db_url) as conn:
                rows = conn.execute(
                    "SELECT j.source_uri, e.tool, e.duration_ms FROM job_events e"
                    " JOIN jobs j ON j.id = e.job_id"
                    " WHERE e.kind = 'mcp_call' AND e.outcome = 'ok'"
                ).fetchall()
        finally:
            stop_worker(proc)
    return {(Path(uri).name, tool): float(ms) for uri, tool, ms in rows}, usage


def stage(args: argparse.Namespace, scratch: Path) -> list[Path]:
    source = Path(corpus_module.build(corpus_module.DEFAULT_DEST)["folder"])
    folder = scratch / "docs"
    folder.mkdir()
    settings = read_settings().sources
    everything = sorted(p for p in source.iterdir() if p.is_file())
    for fmt in corpus_module.FORMATS:
        picked = 0
        for path in (p for p in everything if p.suffix.lower() == f".{fmt}"):
            if picked == args.per_format:
                break
            try:
                validate_file(path, settings)
            except PipelineError:
                continue
            shutil.copyfile(path, folder / path.name)
            picked += 1
    return sorted(folder.iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-format", type=int, default=4, help="Documents of each format.")
    parser.add_argument("--rounds", type=int, default=2, help="direct+worker pairs.")
    parser.add_argument("--smoke", action="store_true", help="One document per format, 1 round.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.per_format, args.rounds = 1, 1
    if not Path(DOCLING_MCP_BIN).exists():
        raise SystemExit(f"{DOCLING_MCP_BIN} is missing: source scripts/lib.sh; ensure_docling_mcp")
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-inworker-", dir=TOOLS))
    broker = claim_redis_db()
    server = DoclingServer(scratch, 200)
    ratios: dict[str, list[float]] = {CONVERT: [], EXPORT_MARKDOWN: []}
    totals: list[dict[str, Any]] = []
    try:
        files = stage(args, scratch)
        for n in range(args.rounds):
            server.start()
            direct_times, direct_use = direct(files, server)
            server.stop()
            server.start()
            worker_times, worker_use = worker(files[0].parent, server, scratch, broker, n)
            server.stop()
            for (name, tool), ms in worker_times.items():
                base = direct_times.get((name, tool))
                if base:
                    ratios[tool].append(ms / base)
            totals.append(
                {
                    "round": n,
                    "direct_call_s": round(sum(direct_times.values()) / 1000, 2),
                    "worker_call_s": round(sum(worker_times.values()) / 1000, 2),
                    "direct": {k: round(v, 2) for k, v in direct_use.items()},
                    "worker": {k: round(v, 2) for k, v in worker_use.items()},
                    "load": Path("/proc/loadavg").read_text().split()[0],
                }
            )
            print(json.dumps(totals[-1]), file=sys.stderr)
    finally:
        server.stop()
        broker.release()
        shutil.rmtree(scratch, ignore_errors=True)
    out = {
        "documents": len(files),
        "rounds": totals,
        "worker_over_direct": {
            tool: {
                "calls": len(r),
                "median": round(statistics.median(r), 3) if r else None,
                "p10": round(percentile(r, 0.1), 3),
                "p90": round(percentile(r, 0.9), 3),
            }
            for tool, r in ratios.items()
        },
    }
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
