"""One small document's convert call against docling-rs-mcp: over HTTP, acknowledged at once or
not, and over stdio; per-call latency percentiles, alternated in one run.

Why it exists: docling-rs-mcp writes the end of each reply stream as a small segment of its own
with Nagle's algorithm on, so the end waits for the client's acknowledgement of the event before
it, which Linux delays by about 40 ms when the client has nothing to send. The client waits for
that end to keep its connection alive (``pipeline/mcp/streamable_http.py``, ``_finish``), so
every call paid 40 ms for a 2 ms conversion until the client acknowledged the event at once. The
``http-delayed-ack`` rows put the old behaviour back (the acknowledgement left to the kernel) to
show the difference side by side.

    .venv/bin/python -m bench.investigations.http_call_latency [--calls 200] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import harness
from bench.harness.docling_rs import RS_BIN, RsServer
from pipeline.mcp import streamable_http as http_transport
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.profiles.base import ConversionRequest, ToolCalls
from pipeline.profiles.docling_rs import DoclingRsProfile

DOCUMENT = "# A title\n\nOne short paragraph, as a small job would carry.\n"


@contextmanager
def _delayed_ack() -> Iterator[None]:
    """The client as it was: no immediate acknowledgement before waiting for the stream's end."""
    kept = http_transport._acknowledge_now
    http_transport._acknowledge_now = lambda stream: None
    try:
        yield
    finally:
        http_transport._acknowledge_now = kept


def _timed_calls(endpoint: str, document: Path, calls: int) -> list[float]:
    """``calls`` sequential converts of ``document`` on one initialized client, in ms each."""
    profile = DoclingRsProfile()
    request = ConversionRequest(
        source=str(document), kind="file", suffix=".md", formats=("md",),
        size_bytes=document.stat().st_size,
    )  # fmt: skip
    took: list[float] = []
    with McpClient(endpoint, settings=McpSettings(request_timeout_s=60)) as client:
        client.initialize()
        client.tools()
        for _ in range(calls):
            started = time.perf_counter()
            profile.convert(ToolCalls(client), request)
            took.append((time.perf_counter() - started) * 1000)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="Calls per row and round.")
    parser.add_argument("--rounds", type=int, default=3, help="Every row N times, in turn.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="doclane-bench-latency-") as folder:
        work = Path(folder)
        document = work / "small.md"
        document.write_text(DOCUMENT)
        server = RsServer(work / "rs", root=work)
        server.work.mkdir()
        server.start()
        stdio = "stdio:" + shlex.join([str(RS_BIN), "--root", str(work)])
        rows: list[tuple[str, Callable[[], list[float]]]] = [
            ("http", lambda: _timed_calls(server.url, document, args.calls)),
            ("http-delayed-ack", lambda: _with_delayed_ack(server.url, document, args.calls)),
            ("stdio", lambda: _timed_calls(stdio, document, args.calls)),
        ]
        report: list[dict[str, Any]] = []
        try:
            for round_no in range(1, args.rounds + 1):
                for name, run in rows:
                    took = sorted(run())
                    row = {
                        "round": round_no,
                        "mode": name,
                        "calls": len(took),
                        "p10_ms": round(harness.percentile(took, 0.1), 2),
                        "p50_ms": round(harness.percentile(took, 0.5), 2),
                        "p90_ms": round(harness.percentile(took, 0.9), 2),
                        "calls_per_s": round(len(took) / (sum(took) / 1000), 1),
                    }
                    report.append(row)
                    print(
                        f"round {round_no} {name}: p10 {row['p10_ms']} p50 {row['p50_ms']}"
                        f" p90 {row['p90_ms']} ms, {row['calls_per_s']} calls/s",
                        file=sys.stderr,
                    )
        finally:
            server.stop()
    if args.json:
        harness.print_json({"rows": report})


def _with_delayed_ack(endpoint: str, document: Path, calls: int) -> list[float]:
    with _delayed_ack():
        return _timed_calls(endpoint, document, calls)


if __name__ == "__main__":
    main()
