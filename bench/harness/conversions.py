"""Real conversions two ways, over the same documents: direct calls and the pipeline.

``direct``: doclane's own MCP client, one document per call (convert, then export the
markdown), every markdown and error code kept. ``pipeline``: ``doclane worker`` and ``doclane
submit --wait`` on a scratch database, each job's markdown or code read back from it. A
:class:`Run` holds either; :func:`compare` sets a pipeline run beside its direct one (markdown
byte for byte, error codes). bench/batch_throughput.py and bench/topologies.py are made of these.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.harness.paths import DOCLANE
from bench.harness.processes import cpu_by_part, per_document_ms
from bench.harness.services import Broker, DoclingServer, scratch_database
from bench.harness.workers import start_worker, stop_worker, worker_env
from errors import PipelineError
from pipeline.mcp.client import McpClient
from pipeline.profiles.base import ToolCalls, require_str, structured
from pipeline.profiles.docling_mcp import CONVERT, EXPORT_MARKDOWN

DIRECTORY_TOOL = "convert_directory_files_into_docling_document"


def ignore(_record: object) -> None:
    """A client loop that keeps no call history (the worker writes one: part of its cost)."""


@dataclass
class Run:
    """One mode's figures; ``markdown`` and ``failures`` are keyed by corpus file name."""

    mode: str
    seconds: float
    documents: int
    markdown: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    others: dict[str, str] = field(default_factory=dict)  # not finished: name -> state
    batches: list[int] = field(default_factory=list)  # documents per batch call
    proven: int = 0
    eliminated: int = 0  # keys proven by elimination (no save)
    tool_seconds: dict[str, float] = field(default_factory=dict)  # the worker's MCP calls
    #: CPU ms a document by whose process (``processes.cpu_by_part``), where the run measured it.
    cpu_ms: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0


def convert_pair(client: McpClient, path: Path, report: Callable[[Any], None]) -> str:
    """One document the way a worker converts it with docling-mcp: convert, then export the
    markdown of the key it answered; the markdown. Every call's record goes to ``report``."""
    size = path.stat().st_size
    result = ToolCalls(client, report).call(
        CONVERT, {"source": str(path)}, stage="convert", size_bytes=size
    )
    key = require_str(structured(result, CONVERT), "document_key", CONVERT)
    result = ToolCalls(client, report).call(
        EXPORT_MARKDOWN, {"document_key": key}, stage="export", size_bytes=size
    )
    return require_str(structured(result, EXPORT_MARKDOWN), "markdown", "export")


def direct(files: list[Path], server: DoclingServer) -> Run:
    """One document per call with doclane's client: convert, then export the markdown."""
    run = Run("direct", 0.0, len(files))

    def tally(record: Any) -> None:
        spent = run.tool_seconds.get(record.tool, 0.0)
        run.tool_seconds[record.tool] = spent + record.duration_s

    with McpClient(server.url) as client:
        client.initialize()  # the handshake is not part of the figure
        client.tools()
        started = time.monotonic()
        for path in files:
            try:
                markdown = convert_pair(client, path, tally)
            except PipelineError as exc:
                run.failures[path.name] = exc.code
            else:
                run.markdown[path.name] = markdown
        run.seconds = time.monotonic() - started
    return run


def pipeline(
    mode: str,
    folder: Path,
    count: int,
    server: DoclingServer,
    scratch: Path,
    *,
    batch_docs: int,
    concurrency: int,
    broker: Broker,
    env: Mapping[str, str] | None = None,
) -> Run:
    """Migrate a scratch database, start ``doclane worker``, submit the corpus, and wait.

    ``env`` overrides the worker's and submit's environment last: another topology (a pool of
    origins, stdio children) than the one ``server`` (bench/topologies.py).
    """
    inbox = scratch / f"inbox-{mode}"
    inbox.mkdir(parents=True, exist_ok=True)
    broker.flush()  # the previous mode's leftovers go; the claim stays
    with scratch_database(f"doclane_bench_batch_{os.getpid()}") as db_url:
        env = worker_env(
            db_url,
            broker,
            server.url,
            DOCLANE_SERVER_CACHE_DIR=str(server.cache_dir),
            DOCLANE_INBOX_DIR=str(inbox),
            DOCLANE_BATCH_MAX_DOCS=str(batch_docs),
            **(env or {}),
        )
        log_path = scratch / f"worker-{mode}.log"
        worker = start_worker(env, log_path, "--concurrency", str(concurrency))
        server_proc = getattr(server, "proc", None)  # None: stdio children of the pool
        server_pid = server_proc.pid if server_proc is not None else None
        try:
            cpu = cpu_by_part(worker.pid, server_pid)
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
            submitted = json.loads(done.stdout)
            run = collect(mode, db_url, started, count)
            run.cpu_ms = per_document_ms(cpu, cpu_by_part(worker.pid, server_pid), count)
            if submitted.get("rejected"):
                for refused in submitted["rejected"]:
                    run.failures[Path(refused["source"]).name] = f"refused {refused['code']}"
        finally:
            stop_worker(worker)
        count_batches(run, log_path)
    return run


def collect(mode: str, db_url: str, started: float, count: int) -> Run:
    """Each job's markdown or error code, and the time of the last one finished."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT j.source_uri, j.state, j.error_code, r.content,"
            " extract(epoch FROM j.finished_at) AS finished"
            " FROM jobs j LEFT JOIN results r ON r.job_id = j.id AND r.format = 'md'"
        ).fetchall()
        # The worker's MCP calls, from the trail (a call that worked has no log line of its
        # own). A directory call is in every member's trail: it counts once, for its lead,
        # whose id and attempt name the batch.
        calls = conn.execute(
            "SELECT e.tool, sum(e.duration_ms) / 1000.0 FROM job_events e"
            " WHERE e.kind = 'mcp_call' AND (e.tool <> %s OR EXISTS ("
            "  SELECT 1 FROM job_events n WHERE n.kind = 'note'"
            "  AND n.detail->>'batch' = 'batch-' || e.job_id || '-' || e.attempt))"
            " GROUP BY e.tool",
            (DIRECTORY_TOOL,),
        ).fetchall()
    finished = [float(row[4]) for row in rows if row[4] is not None]
    run = Run(mode, (max(finished) - started) if finished else 0.0, count)
    run.tool_seconds = {str(tool): float(seconds) for tool, seconds in calls}
    for source, state, code, content, _ in rows:
        name = Path(source).name
        if state == "succeeded" and content is not None:
            run.markdown[name] = content
        elif state == "failed":
            run.failures[name] = str(code)
        else:
            run.others[name] = str(state)
    return run


def count_batches(run: Run, log_path: Path) -> None:
    """Batch sizes and proven keys, from the worker's log lines: ``batch ...: N key(s) for D
    document(s), P proven (X by elimination)`` once per batch."""
    for line in log_path.read_text(errors="replace").splitlines():
        if " key(s) for " in line:
            tail = line.split(" key(s) for ", 1)[1]  # "D document(s), P proven"
            docs, _, proven = tail.partition(" document(s), ")
            with contextlib.suppress(ValueError):
                run.batches.append(int(docs))
                run.proven += int(proven.split()[0])
            run.eliminated += "(none by elimination)" not in line and "by elimination" in line


def compare(base: Run, run: Run) -> dict[str, Any]:
    identical = sum(1 for n, md in run.markdown.items() if base.markdown.get(n) == md)
    differs = sorted(
        n for n, md in run.markdown.items() if n in base.markdown and base.markdown[n] != md
    )
    code_mismatch = sorted(
        n
        for n in set(base.failures) | set(run.failures)
        if base.failures.get(n) != run.failures.get(n)
    )
    return {
        "mode": run.mode,
        "seconds": round(run.seconds, 2),
        "docs_per_s": round(run.rate, 2),
        "ratio_to_direct": round(run.rate / base.rate, 2) if base.rate else None,
        "succeeded": len(run.markdown),
        "failed": len(run.failures),
        "not_finished": run.others,
        "markdown_identical": identical,
        "markdown_differs": differs,
        "failure_codes_differ": {
            n: [base.failures.get(n), run.failures.get(n)] for n in code_mismatch
        },
        "batch_calls": len(run.batches),
        "batched_documents": sum(run.batches),
        "proven": run.proven,
        "eliminated": run.eliminated,
        "tool_seconds": {tool: round(t, 1) for tool, t in sorted(run.tool_seconds.items())},
    }
