"""Real conversions side by side: one document per call, the pipeline with and without batches.

Issue 12's figure (batches at least 5x one document per call) and issue 15's third (the pipeline
at least 0.95x direct calls with batches off, 5x with batches on, markdown byte-identical), on
the real-world corpus of ``bench/corpus.py`` and one local docling-mcp 3.3.0 (local mode):

1. ``direct``: doclane's own MCP client, sequentially, one document per call: convert, then
   export the markdown; every markdown and every error code is kept.
2. ``off``: ``doclane worker -c N`` with ``DOCLANE_BATCH_MAX_DOCS=1``, and
   ``doclane submit <corpus> --wait --json``.
3. ``on-B``: the same with ``DOCLANE_BATCH_MAX_DOCS=B`` (``--batch-docs``, several allowed).

The server is restarted with an empty cache before every mode, so no conversion is a cache hit
and no mode warms the next one; each pipeline mode gets a freshly migrated scratch database (no
deduplication across modes), a Redis database claimed as the test suite claims its brokers,
and a scratch inbox. A pipeline
mode's time runs from just before ``doclane submit`` starts (hashing and enqueueing included)
to the last job's ``finished_at``. Every job's markdown is compared byte for byte with the
direct call's markdown of the same file, and every failure's code with the direct call's code.
Documents ``doclane submit`` would refuse (E1xx) are set aside and listed, so that both sides
measure the same documents.

    .venv/bin/python bench/batch_throughput.py [--smoke] [--batch-docs 8,32] [--concurrency 1]
        [--rounds 2] [--no-off]

``--rounds N`` runs direct and every mode N times in turn (A B A B: the load of a shared machine
then weighs on both sides) and ends with each mode's median rate and median ratio to the
direct figure of its own round.

``--smoke`` takes a dozen documents of every kind and one batch size (what CI runs: it proves
the bench still works, its figures mean nothing). Everything started is stopped and every
scratch database and folder removed at the end (``--keep`` keeps the scratch folder: logs).
The figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import corpus as corpus_module  # noqa: E402

from errors import PipelineError  # noqa: E402
from pipeline.mcp import McpClient  # noqa: E402
from pipeline.profiles.base import call_tool, require_str, structured  # noqa: E402
from pipeline.profiles.docling_mcp import CONVERT, EXPORT_MARKDOWN  # noqa: E402
from pipeline.sources import load_source_settings  # noqa: E402
from pipeline.sources.local import validate_file  # noqa: E402
from tests.fixtures.brokers import (  # noqa: E402
    _CANDIDATE_DBS,
    REDIS_HOST,
    REDIS_PORT,
    Broker,
    _claimable,
)

DOCLANE = str(Path(sys.executable).with_name("doclane"))
TOOLS = Path(os.environ.get("DOCLANE_TOOLS_DIR", Path.home() / ".cache" / "doclane"))
DOCLING_MCP_BIN = os.environ.get(
    "DOCLANE_DOCLING_MCP_BIN", str(TOOLS / "docling-mcp-venv" / "bin" / "docling-mcp-server")
)
ADMIN_DB_URL = os.environ.get(
    "DOCLANE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DIRECTORY_TOOL = "convert_directory_files_into_docling_document"


# ---- the server ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class DoclingServer:
    """One docling-mcp, started as scripts/lib.sh's ``start_docling_mcp`` does, cache empty."""

    def __init__(
        self, work: Path, cache_documents: int, extra_env: Mapping[str, str] | None = None
    ) -> None:
        self.work = work
        self.cache_documents = cache_documents
        self.extra_env = dict(extra_env or {})  # e.g. remote mode (bench/topologies.py)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.cache_dir = work / "cache"

    def start(self) -> None:
        if self.cache_dir.exists():
            shutil.rmtree(self.cache_dir)
        self.cache_dir.mkdir(parents=True)
        port = free_port()
        env = {
            **os.environ,
            "DOCLING_MCP_CONVERSION_MODE": "local",
            "CACHE_DIR": str(self.cache_dir),
            "HF_HUB_OFFLINE": "1",
            "DOCLING_MCP_CACHE_MAX_DOCUMENTS": str(self.cache_documents),
            **self.extra_env,
        }
        self.work.mkdir(parents=True, exist_ok=True)
        with open(self.work / "server.log", "ab") as logfile:
            self.proc = subprocess.Popen(
                [
                    DOCLING_MCP_BIN,
                    "--transport",
                    "streamable-http",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                cwd=self.work,
                env=env,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while not port_open(port):
            if self.proc.poll() is not None:
                raise SystemExit(f"docling-mcp exited at start (log: {self.work / 'server.log'})")
            if time.monotonic() > deadline:
                raise SystemExit("docling-mcp did not listen within 120 s")
            time.sleep(0.2)
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            stop_group(proc, 20)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group of a server started in its own session; SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ---- outcomes --------------------------------------------------------------------------------
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

    @property
    def rate(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0


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
            size = path.stat().st_size
            try:
                result = call_tool(
                    client,
                    CONVERT,
                    {"source": str(path)},
                    stage="convert",
                    report=tally,
                    size_bytes=size,
                )
                key = require_str(structured(result, CONVERT), "document_key", CONVERT)
                result = call_tool(
                    client,
                    EXPORT_MARKDOWN,
                    {"document_key": key},
                    stage="export",
                    report=tally,
                    size_bytes=size,
                )
                markdown = require_str(structured(result, EXPORT_MARKDOWN), "markdown", "export")
            except PipelineError as exc:
                run.failures[path.name] = exc.code
            else:
                run.markdown[path.name] = markdown
        run.seconds = time.monotonic() - started
    return run


# ---- the pipeline ----------------------------------------------------------------------------
@contextlib.contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A database of its own, migrated by ``doclane db migrate``, dropped afterwards."""
    params = conninfo_to_dict(ADMIN_DB_URL)
    with psycopg.connect(ADMIN_DB_URL, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(**{**params, "dbname": name})
    try:
        yield url
    finally:
        with psycopg.connect(ADMIN_DB_URL, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def claim_redis_db() -> Broker:
    """A Redis database claimed the way the test suite claims its brokers (a lock key in it).

    The machine is shared: a test session that finds a database empty takes it, and its
    workers would then consume this bench's messages (jobs left waiting until the reconciler
    republishes them, 300 s later). Honouring the same claim keeps both sides apart.
    """
    for db in _CANDIDATE_DBS:
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        try:
            if _claimable(client):
                return Broker("redis", f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}", redis_db=db)
        finally:
            client.close()
    raise SystemExit(f"no free Redis database among {list(_CANDIDATE_DBS)} for the bench")


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
        try:
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
            if submitted.get("rejected"):
                for refused in submitted["rejected"]:
                    run.failures[Path(refused["source"]).name] = f"refused {refused['code']}"
        finally:
            stop_worker(worker)
        count_batches(run, log_path)
    return run


def worker_env(db_url: str, broker: Broker, origin: str, **settings: str) -> dict[str, str]:
    """The environment of a bench's ``doclane worker`` and ``doclane submit``: a scratch
    database and broker, ``origin`` (one, or several comma-separated), the docling-mcp profile,
    batches off and INFO logs (``wait_ready`` reads the "ready." line) unless ``settings``
    (``DOCLANE_*`` names) say otherwise."""
    return {
        **os.environ,
        "DOCLANE_DATABASE_URL": db_url,
        "DOCLANE_BROKER_URL": broker.url,
        "DOCLANE_REDIS_URL": broker.url,
        "DOCLING_MCP_ORIGIN": origin,
        "DOCLANE_BATCH_MAX_DOCS": "1",
        "DOCLANE_PROFILE": "docling-mcp",
        "DOCLANE_LOG_LEVEL": "INFO",
        **settings,
    }


def start_worker(env: Mapping[str, str], log_path: Path, *args: str) -> subprocess.Popen[bytes]:
    """Migrate the scratch database, start ``doclane worker <args>`` (its own process group,
    logging to ``log_path``) and wait until it is ready; the caller stops it (``stop_worker``)."""
    subprocess.run([DOCLANE, "db", "migrate"], env=env, check=True, capture_output=True)
    with open(log_path, "wb") as logfile:
        worker = subprocess.Popen(
            [DOCLANE, "worker", *args],
            env=env,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(worker, log_path)
    except BaseException:
        stop_worker(worker)
        raise
    return worker


def wait_ready(worker: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 90
    while b" ready." not in log_path.read_bytes():
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited before it was ready (log: {log_path})")
        if time.monotonic() > deadline:
            raise SystemExit(f"the worker was not ready within 90 s (log: {log_path})")
        time.sleep(0.2)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Celery's warm shutdown), then the whole process group if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()


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


# ---- the report ------------------------------------------------------------------------------
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


def choose_files(folder: Path, smoke: bool) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if not smoke:
        return files
    picked: list[Path] = []
    for fmt in corpus_module.FORMATS:
        picked += [p for p in files if p.suffix.lower() == f".{fmt}"][:2]
    return picked


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="A folder of documents (default: bench/corpus.py's, built if missing).",
    )
    parser.add_argument("--smoke", action="store_true", help="Two documents of each format.")
    parser.add_argument(
        "--batch-docs",
        default="8,32",
        help="DOCLANE_BATCH_MAX_DOCS of each batches-on run, comma-separated.",
    )
    parser.add_argument(
        "--concurrency", default="1", help="Worker processes (doclane worker -c), comma-separated."
    )
    parser.add_argument(
        "--cache-documents",
        type=int,
        default=200,
        help="The server's DOCLING_MCP_CACHE_MAX_DOCUMENTS.",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="Run direct and every mode this many times."
    )
    parser.add_argument(
        "--no-off", action="store_true", help="Skip the batches-off mode (direct is always run)."
    )
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder (logs).")
    return parser.parse_args()


def stage_corpus(args: argparse.Namespace, scratch: Path) -> tuple[list[Path], dict[str, str]]:
    """The documents to submit, linked into one scratch folder (a subset with ``--smoke``).

    Documents that ``doclane submit`` would refuse (its E1xx checks, run here by the same
    function) are set aside and reported: they never reach a server in the pipeline, so timing
    them in the direct mode only would compare two different sets of documents.
    """
    if args.corpus is None:
        source_folder = Path(corpus_module.build(corpus_module.DEFAULT_DEST)["folder"])
    else:
        source_folder = args.corpus.expanduser().resolve()
    folder = scratch / "corpus"
    folder.mkdir()
    settings = load_source_settings()
    refused: dict[str, str] = {}
    for path in choose_files(source_folder, args.smoke):
        try:
            validate_file(path, settings)
        except PipelineError as exc:
            refused[path.name] = f"{exc.code} {exc.message.split(': ', 1)[-1]}"
            continue
        try:
            os.link(path, folder / path.name)
        except OSError:  # another filesystem
            shutil.copyfile(path, folder / path.name)
    files = sorted(folder.iterdir())
    print(
        f"{len(files)} documents from {source_folder} ({len(refused)} refused by doclane submit)",
        file=sys.stderr,
    )
    return files, refused


def measure(args: argparse.Namespace, files: list[Path], scratch: Path) -> list[Run]:
    """Direct calls first, then each pipeline mode, the server restarted before each."""
    batch_sizes = [int(b) for b in args.batch_docs.split(",") if b.strip()]
    if args.smoke:
        batch_sizes = batch_sizes[:1]
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    plan = [] if args.no_off else [(f"off-c{c}", 1, c) for c in concurrencies]
    plan += [(f"on{b}-c{c}", b, c) for b in batch_sizes for c in concurrencies]
    broker = claim_redis_db()
    server = DoclingServer(scratch, args.cache_documents)
    runs: list[Run] = []
    try:
        server.start()
        runs.append(direct(files, server))
        print(f"direct: {runs[-1].rate:.2f} docs/s", file=sys.stderr)
        for mode, batch_docs, concurrency in plan:
            server.stop()
            server.start()
            run = pipeline(
                mode,
                files[0].parent,
                len(files),
                server,
                scratch,
                batch_docs=batch_docs,
                concurrency=concurrency,
                broker=broker,
            )
            runs.append(run)
            print(f"{mode}: {run.rate:.2f} docs/s", file=sys.stderr)
    finally:
        server.stop()
        broker.release()
    return runs


def show(runs: list[Run], refused: dict[str, str], as_json: bool) -> None:
    base = runs[0]
    rows = [compare(base, run) for run in runs[1:]]
    if as_json:
        direct_row = {
            "seconds": round(base.seconds, 2),
            "docs_per_s": round(base.rate, 2),
            "succeeded": len(base.markdown),
            "failures": base.failures,
            "tool_seconds": {tool: round(t, 1) for tool, t in sorted(base.tool_seconds.items())},
        }
        out = {"documents": base.documents, "refused_at_submit": refused, "direct": direct_row}
        print(json.dumps({**out, "pipeline": rows}))
        return
    for name, why in sorted(refused.items()):
        print(f"set aside (doclane submit refuses it): {name}: {why}")
    print(
        f"{base.documents} documents; direct: {base.seconds:.1f} s, {base.rate:.2f} docs/s, "
        f"{len(base.markdown)} converted, {len(base.failures)} failed"
    )
    print(
        f"{'mode':<10} {'s':>7} {'docs/s':>7} {'x direct':>8} {'ok':>4} {'fail':>4} "
        f"{'md same':>7} {'md diff':>7} {'code diff':>9} {'batches':>7} {'in batch':>8}"
    )
    for row in rows:
        print(
            f"{row['mode']:<10} {row['seconds']:>7.1f} {row['docs_per_s']:>7.2f} "
            f"{row['ratio_to_direct']:>8.2f} {row['succeeded']:>4} {row['failed']:>4} "
            f"{row['markdown_identical']:>7} {len(row['markdown_differs']):>7} "
            f"{len(row['failure_codes_differ']):>9} {row['batch_calls']:>7} "
            f"{row['proven']:>8}"
        )
    if base.failures:
        failed = ", ".join(f"{n} {c}" for n, c in sorted(base.failures.items()))
        print(f"failures (direct): {failed}")
    spent = ", ".join(f"{tool} {t:.1f}" for tool, t in sorted(base.tool_seconds.items()))
    print(f"direct MCP calls, s: {spent}")
    for row in rows:
        spent = ", ".join(f"{tool} {t:.1f}" for tool, t in row["tool_seconds"].items())
        print(f"{row['mode']} worker's MCP calls, s: {spent}")
    for row in rows:
        for what in ("markdown_differs", "failure_codes_differ", "not_finished"):
            if row[what]:
                print(f"{row['mode']} {what}: {row[what]}")


def main() -> None:
    args = parse_args()
    if not Path(DOCLING_MCP_BIN).exists():
        raise SystemExit(f"{DOCLING_MCP_BIN} is missing: source scripts/lib.sh; ensure_docling_mcp")
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-batch-", dir=TOOLS))
    print(f"scratch folder: {scratch}", file=sys.stderr)
    rounds: list[list[Run]] = []
    try:
        files, refused = stage_corpus(args, scratch)
        for _ in range(args.rounds):  # direct, then each mode, again: A B A B on a shared machine
            rounds.append(measure(args, files, scratch))
            show(rounds[-1], refused, args.json)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    if len(rounds) > 1:
        show_medians(rounds, args.json)


def show_medians(rounds: list[list[Run]], as_json: bool) -> None:
    """Per mode, the median over rounds of its rate and of its ratio to that round's direct."""
    medians: dict[str, dict[str, float]] = {}
    for n, mode in enumerate(run.mode for run in rounds[0]):
        rates = [runs[n].rate for runs in rounds]
        ratios = [runs[n].rate / runs[0].rate for runs in rounds if runs[0].rate]
        medians[mode] = {
            "docs_per_s": round(statistics.median(rates), 2),
            "ratio_to_direct": round(statistics.median(ratios), 2),
        }
    if as_json:
        print(json.dumps({"rounds": len(rounds), "median": medians}))
        return
    print(f"medians over {len(rounds)} rounds:")
    for mode, row in medians.items():
        rate, ratio = row["docs_per_s"], row["ratio_to_direct"]
        print(f"  {mode:<10} {rate:>7.2f} docs/s {ratio:>6.2f}x direct")


if __name__ == "__main__":
    main()
