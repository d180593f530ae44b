"""The same MCP calls cost more CPU when the machine idles between them (the pipeline figure).

One fake Docling MCP server; doclane's client makes convert+export pairs, alternating two ways:
back to back (as the pipeline bench's client loop does), and with a pause after each pair (as a
worker's calls come, between a claim and a commit). It prints each variant's pairs/s and the
CPU per pair of the client and of the server (``/proc/PID/stat``). On the project's VMs the
pause alone raises both, which is part of why a pipeline job's two calls cost more than the
loop's: see *What we learned* in docs/benchmarks.md.

    .venv/bin/python -m bench.investigations.cold_calls
        [--pairs 900] [--pause-ms 4] [--rounds 2] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import TOOLS, FakeServer, process_cpu_s, write_documents
from bench.harness.conversions import ignore
from pipeline.mcp.client import McpClient
from pipeline.profiles.base import ToolCalls, require_str, structured
from pipeline.profiles.docling_mcp import CONVERT, EXPORT_MARKDOWN


def pairs(url: str, files: list[Path], server_pid: int, pause_s: float) -> dict[str, float]:
    """Sequential convert+export pairs, ``pause_s`` of sleep after each (not timed as CPU)."""
    with McpClient(url) as client:
        client.initialize()
        client.tools()
        server_cpu, own_cpu = process_cpu_s(server_pid), time.process_time()
        started = time.perf_counter()
        calls = ToolCalls(client, ignore)
        for path in files:
            size = path.stat().st_size
            result = calls.call(CONVERT, {"source": str(path)}, stage="convert", size_bytes=size)
            key = require_str(structured(result, CONVERT), "document_key", CONVERT)
            result = calls.call(
                EXPORT_MARKDOWN, {"document_key": key}, stage="export", size_bytes=size
            )
            require_str(structured(result, EXPORT_MARKDOWN), "markdown", "export")
            if pause_s:
                time.sleep(pause_s)  # the pause is the variable measured, not a synchronisation
        elapsed = time.perf_counter() - started
        return {
            "pairs_per_s": len(files) / elapsed,
            "client_cpu_ms": (time.process_time() - own_cpu) / len(files) * 1000,
            "server_cpu_ms": (process_cpu_s(server_pid) - server_cpu) / len(files) * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=900, help="Pairs per variant and round.")
    parser.add_argument("--pause-ms", type=float, default=4.0, help="Sleep after each pair.")
    parser.add_argument("--rounds", type=int, default=2, help="Back to back, paused; repeated.")
    parser.add_argument("--smoke", action="store_true", help="Tiny counts (CI).")
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    args = parser.parse_args()
    if args.smoke:
        args.pairs, args.rounds = 10, 1
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-cold-", dir=TOOLS))
    variants = {"back_to_back": 0.0, "paused": args.pause_ms / 1000}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    files = write_documents(scratch / "docs", args.pairs * len(variants) * args.rounds + 50, "c")
    server = FakeServer(scratch, cache_max_documents=len(files) + 100)
    try:
        server.start()
        pairs(server.url, files[:50], server.pid, 0.0)  # warm-up: imports, connections
        chunks = iter(range(50, len(files), args.pairs))
        for _ in range(args.rounds):
            for name, pause in variants.items():
                start = next(chunks)
                runs[name].append(pairs(server.url, files[start:start + args.pairs],
                                        server.pid, pause))  # fmt: skip
                print(f"{name}: {runs[name][-1]}", file=sys.stderr)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report: dict[str, Any] = {
        "pairs": args.pairs,
        "pause_ms": args.pause_ms,
        "rounds": args.rounds,
        "variants": {
            name: {key: round(statistics.median(r[key] for r in got), 2) for key in got[0]}
            for name, got in runs.items()
        },
        "runs": runs,
    }
    if args.json:
        print(json.dumps(report))
        return
    for name, medians in report["variants"].items():
        print(
            f"{name:>13}: {medians['pairs_per_s']:.0f} pairs/s, client {medians['client_cpu_ms']}"
            f" ms, server {medians['server_cpu_ms']} ms CPU per pair (medians of {args.rounds})"
        )


if __name__ == "__main__":
    main()
