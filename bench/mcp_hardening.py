"""The MCP client against a misbehaving server: deadlines that hold, replies that are bounded.

Starts the fake Docling MCP server (tests/fakes, the official SDK) and runs ``doclane mcp call``
as an operator would, three ways, each ``--rounds`` times:

- ``keepalive``: the tool hangs while the server keeps its SSE reply alive (a comment or an
  empty event every 0.2 s); ``DOCLANE_TIMEOUT_SMALL_S=3``, one try. Reports the wall time to
  E303 and whether the server received ``notifications/cancelled``.
- ``trickle``: a JSON reply trickled one byte every 0.3 s; same deadline.
- ``oversize``: a 300 MB reply under ``DOCLANE_MCP_MAX_REPLY_BYTES=10485760``. Reports the
  error code and the CLI's peak RSS (``/usr/bin/time -v``'s maximum resident set size).

    .venv/bin/python -m bench.mcp_hardening [--rounds 3] [--oversize-bytes 300000000] [--json]

Figures go to docs/benchmarks.md. Nothing here is asserted: the tests prove the behaviour,
this measures it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import DOCLANE, ROOT, FakeServer, print_json

SAMPLE = str(ROOT / "examples" / "quarterly-report.docx")
CONVERT = "convert_document_into_docling_document"


def call(server: FakeServer, **env: str) -> tuple[dict[str, Any], float, int]:
    """One ``doclane mcp call``: its JSON report, wall seconds, peak RSS in KiB."""
    command = [
        "/usr/bin/time", "-v", DOCLANE, "mcp", "call", CONVERT,
        "--args", json.dumps({"source": SAMPLE}), "--size-bytes", "10",
        "--origin", server.url, "--json",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "DOCLANE_RETRY_MAX_TRIES": "1", **env},
    )
    elapsed = time.monotonic() - started
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    report = json.loads(done.stdout.splitlines()[0]) if done.stdout.strip() else {}
    return report, elapsed, int(rss.group(1)) if rss else -1


def code_of(report: dict[str, Any]) -> str:
    return str((report.get("error") or {}).get("code", "ok"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--oversize-bytes", type=int, default=300_000_000)
    parser.add_argument("--json", action="store_true", help="the table on stderr, JSON on stdout")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="doclane-bench-hardening-") as scratch,
        FakeServer(Path(scratch)) as sse,
        FakeServer(Path(scratch), json_response=True) as plain,
    ):
        rows: list[tuple[str, str, list[float], list[int], str]] = []
        figures: dict[str, dict[str, Any]] = {}
        for name, server, knobs, env in (
            ("keepalive", sse, {"fail_next": -1, "fail_with": "hang", "keepalive_s": 0.2},
             {"DOCLANE_TIMEOUT_SMALL_S": "3"}),
            ("trickle", plain, {"trickle_s": 0.3}, {"DOCLANE_TIMEOUT_SMALL_S": "3"}),
            ("oversize", sse, {"oversize_reply_bytes": args.oversize_bytes},
             {"DOCLANE_MCP_MAX_REPLY_BYTES": "10485760"}),
        ):  # fmt: skip
            walls: list[float] = []
            peaks: list[int] = []
            codes: set[str] = set()
            cancelled = 0
            for _ in range(args.rounds):
                server.reset()
                server.configure(**knobs)
                report, wall, peak = call(server, **env)
                walls.append(wall)
                peaks.append(peak)
                codes.add(code_of(report))
                cancelled += len(server.stats()["cancelled"])
            note = f"notifications/cancelled received: {cancelled}/{args.rounds}"
            rows.append((name, ",".join(sorted(codes)), walls, peaks, note))
            figures[name] = {"codes": sorted(codes), "wall_s": walls, "peak_rss_kib": peaks,
                             "cancelled_received": cancelled}  # fmt: skip
    for name, shown_codes, walls, peaks, note in rows:
        print(
            f"{name:<10} {shown_codes:<5} wall s min/median/max "
            f"{min(walls):.2f}/{statistics.median(walls):.2f}/{max(walls):.2f}  "
            f"peak RSS MiB median {statistics.median(peaks) / 1024:.0f} "
            f"(max {max(peaks) / 1024:.0f})  {note}",
            file=sys.stderr if args.json else sys.stdout,
        )
    if args.json:
        print_json({"rounds": args.rounds, "calls": figures})


if __name__ == "__main__":
    main()
