"""One long text PDF: the whole fleet converting its slices against one direct call of it all.

::

    python -m bench.sliced_pdf                       # 1,000 pages, slices of 32, -c 2
    python -m bench.sliced_pdf --pages 300 --slice-pages 16 --concurrency 2
    python -m bench.sliced_pdf --smoke --json        # 40 pages, slices of 8 (tests/bench)

The PDF is the project's own (tests/support/long_pdf.py: a heading and two paragraphs a page).
One docling-rs-mcp over HTTP serves both runs:

- ``direct``: doclane's MCP client and the docling-rs profile, one ``convert{to: md}`` call of
  the whole document (the server converts it on one thread, as any single call is);
- ``sliced``: ``doclane worker -c N`` with ``DOCLANE_SLICE_PAGES``: ``sliced_s`` is the split
  job's life in the database (created at submit, finished when the last slice's result was
  assembled); ``submit_to_done_s`` adds the ``doclane submit`` command's start-up and the poll.

The report gives both wall times, the slices, whether the assembled Markdown equals the direct
call's, and the load average before and after (the machine is shared: run it under
``flock /tmp/doclane-bench.lock``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import harness
from bench.harness.docling_rs import RsServer
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.profiles.base import ConversionRequest, ToolCalls
from pipeline.profiles.docling_rs import DoclingRsProfile
from tests.support.long_pdf import write_long_pdf


def direct_call(server: RsServer, pdf: Path) -> tuple[float, str]:
    """Seconds of one ``convert`` of the whole document, and its Markdown."""
    request = ConversionRequest(
        source=str(pdf), kind="file", suffix=".pdf", formats=("md",),
        size_bytes=pdf.stat().st_size,
    )  # fmt: skip
    with McpClient(server.url, settings=McpSettings(request_timeout_s=3600)) as client:
        client.initialize()  # the handshake is not part of the figure
        client.tools()
        started = time.monotonic()
        outputs = DoclingRsProfile().convert(ToolCalls(client), request).outputs
        return time.monotonic() - started, outputs["md"]


def sliced_run(
    server: RsServer, pdf: Path, work: Path, *, slice_pages: int, concurrency: int
) -> dict[str, Any]:
    """The pipeline's run: seconds from submit to the assembled result, slices, Markdown."""
    broker = harness.claim_redis_db()
    with harness.scratch_database(f"doclane_bench_sliced_{os.getpid()}") as db_url:
        env = harness.worker_env(
            db_url, broker, server.url,
            DOCLANE_PROFILE="docling-rs", DOCLANE_SLICE_PAGES=str(slice_pages),
            DOCLANE_ALLOWED_ROOTS=str(work),
        )  # fmt: skip
        worker = harness.start_worker(env, work / "worker.log", "--concurrency", str(concurrency))
        try:
            started = time.monotonic()
            subprocess.run(
                [harness.DOCLANE, "submit", str(pdf), "--to", "md", "--no-dedup", "--json"],
                env=env, check=True, capture_output=True, cwd=work,
            )  # fmt: skip
            parent = wait_assembled(db_url, timeout=3600)
            seconds = time.monotonic() - started
        finally:
            harness.stop_worker(worker)
            broker.release()
        return {"submit_to_done_s": seconds, **parent}


def wait_assembled(db_url: str, *, timeout: float) -> dict[str, Any]:
    """Poll the split job until it has ended; its state, slices and Markdown."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(db_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT j.state, j.slices_total, j.error_code, r.content,"
                " extract(epoch FROM j.finished_at - j.created_at)::float8 FROM jobs j"
                " LEFT JOIN results r ON r.job_id = j.id AND r.format = 'md'"
                " WHERE j.parent_id IS NULL AND j.finished_at IS NOT NULL"
            ).fetchone()
            if row is not None:
                state, slices, code, markdown, in_database_s = row
                return {
                    "state": state, "slices": slices, "error_code": code, "md": markdown,
                    "in_database_s": in_database_s,
                }  # fmt: skip
            time.sleep(0.1)
    raise SystemExit(f"the document was not assembled within {timeout:.0f} s")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--slice-pages", type=int, default=32)
    parser.add_argument("--concurrency", "-c", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="40 pages, slices of 8")
    parser.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    args = parser.parse_args()
    if args.smoke:
        args.pages, args.slice_pages = 40, 8
    return args


def main() -> None:
    args = parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="doclane-bench-sliced-") as scratch:
        work = Path(scratch)
        pdf = write_long_pdf(work / f"report-{args.pages}.pdf", pages=args.pages)
        server = RsServer(work / "rs", root=work)
        server.work.mkdir()
        server.start()
        try:
            direct_s, direct_md = direct_call(server, pdf)
            print(f"direct: {direct_s:.2f} s", file=sys.stderr)
            run = sliced_run(
                server, pdf, work, slice_pages=args.slice_pages, concurrency=args.concurrency
            )
        finally:
            server.stop()
    report = {
        "pages": args.pages,
        "slice_pages": args.slice_pages,
        "concurrency": args.concurrency,
        "direct_s": round(direct_s, 3),
        "sliced_s": round(run["in_database_s"], 3),
        "submit_to_done_s": round(run["submit_to_done_s"], 3),
        "speedup": round(direct_s / run["in_database_s"], 2),
        "state": run["state"],
        "error_code": run["error_code"],
        "slices": run["slices"],
        "md_equal": run["md"] == direct_md,
        "md_chars": len(direct_md),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        harness.print_json(report)
    else:
        for key, value in report.items():
            print(f"{key:>12}: {value}")


if __name__ == "__main__":
    main()
