"""Topologies: the same corpus through every topology, with and without batches.

On the real-world corpus of ``bench/corpus.py`` (the documents ``doclane submit`` accepts), each
topology through doclane's pipeline (``doclane worker -c N`` + ``doclane submit --wait``, as
``bench/batch_throughput.py`` does, both made of ``bench.harness.conversions``), once with
``DOCLANE_BATCH_MAX_DOCS=1`` (``off``) and once with ``--batch-docs`` (``on64``):

- ``a-http``: one docling-mcp 3.3.0 over streamable HTTP, local mode (``-c 1``);
- ``b-pool``: two of them, ``DOCLING_MCP_ORIGIN`` naming both (``-c 2``);
- ``c-stdio``: a ``docling-mcp-server --transport stdio`` child per worker process
  (``DOCLING_MCP_COMMAND``; ``-c 1`` and ``-c 2``; a child's start is inside the time);
- ``d-remote``: one docling-mcp in remote mode over docling-serve 1.38.2
  (``DOCLING_MCP_CONVERSION_MODE=remote``, ``DOCLING_MCP_SERVICE_URL``; ``-c 2``);
- ``d-remote-pool``: two of those in a pool over the one docling-serve (``-c 2``).

The servers of a pool share one cache folder (the one the worker reads the batch proof from);
the corpus is a fixed subset, the first ``--per-format`` (18) documents of each format by name;
``--rounds N`` runs every mode N times in turn and reports the median round.

and docling.rs's server (docling-rs-mcp 2.52.7, ``bench/rs_server.py``), batches off (it has no
directory tool, and a call costs milliseconds):

- ``rs-http-c2``: ``doclane worker -c 2`` over one docling-rs-mcp over HTTP;
- ``rs-stdio-c2``: a docling-rs-mcp child per worker process, ``-c 2``;
- ``rs-direct``, ``rs-direct-x2``: doclane's MCP client and docling-rs profile calling it
  directly, one client sequentially, and two clients at once (the baselines these are held to:
  every markdown must equal ``rs-direct``'s, column ``md=rs``). Each of these says its CPU
  per document by whose process it was (``bench.harness.processes.cpu_by_part``: the worker's
  pool and main process, the server, the processes this bench reaped (the submitter, the
  direct clients), PostgreSQL, Redis): the floor part by part;

and two baselines without doclane's pipeline:

- ``direct``: doclane's MCP client calling one local docling-mcp sequentially (convert + export);
- ``e-serve``: docling-serve's own async API (``POST /v1/convert/file/async``, poll
  ``/v1/status/poll/{id}``, ``GET /v1/result/{id}``, markdown requested), as many tasks in flight
  as its local engine has workers (``--serve-workers``, 2 by default as docling-serve's own).

Every server is started afresh before every mode (empty caches, cold converters; start-up not
timed). Every markdown is compared byte for byte with ``direct``'s (docling-mcp local mode) and
with ``e-serve``'s (docling-serve): docling-mcp over docling-serve must give docling-serve's
markdown. docling-serve is installed on first use into its own venv
(``bench/harness/docling_serve.py`` says how it is run offline).

    flock /tmp/doclane-bench.lock .venv/bin/python -m bench.topologies [--smoke] [--json]
        [--rounds 1] [--modes direct,a-http-c1-on,...] [--batch-docs 64] [--serve-workers 2]

``--smoke`` (what CI runs through tests/bench/test_topologies_smoke.py): two documents of each
format and four modes (direct, a-http-c1 on, d-remote-c2 on, e-serve); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import corpus as corpus_module
from bench import harness
from bench import rs_server as rs
from bench.harness import conversions
from bench.harness import docling_serve as ds
from bench.harness.conversions import Run
from pipeline.processing.settings import ProcessingSettings
from tests.support.tools import DOCLING_SERVE_BINARY

SMOKE_MODES = ("direct", "a-http-c1-on", "d-remote-c2-on", "e-serve")


@dataclass
class Topology:
    """How to start the servers of one topology and what the worker's environment says."""

    name: str
    concurrency: int
    servers: int = 1  # docling-mcp HTTP servers
    stdio: bool = False
    remote: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    #: The MCP server each of ``servers`` (or each stdio child) runs.
    binary: str = harness.DOCLING_MCP_BIN


TOPOLOGIES = (
    Topology("a-http", 1),
    Topology("b-pool", 2, servers=2),
    Topology("c-stdio", 1, servers=0, stdio=True),
    Topology("c-stdio", 2, servers=0, stdio=True),
    Topology("d-remote", 2, remote=True),
    Topology("d-remote-pool", 2, servers=2, remote=True),
)


class Stack:
    """The servers one mode needs, started afresh, stopped however the mode ends."""

    def __init__(self, topo: Topology, scratch: Path, cache_documents: int, workers: int) -> None:
        self.topo = topo
        self.serve = ds.DoclingServe(scratch / "docling-serve", workers) if topo.remote else None
        self.mcp: list[harness.DoclingServer] = []
        self.scratch = scratch
        self.cache_documents = cache_documents

    def __enter__(self) -> Stack:
        try:
            extra: dict[str, str] = {}
            if self.serve is not None:
                self.serve.start()
                extra = {
                    "DOCLING_MCP_CONVERSION_MODE": "remote",
                    "DOCLING_MCP_SERVICE_URL": self.serve.url,
                    **ds.REMOTE_MCP_ENV,
                }
            for n in range(max(self.topo.servers, 1)):
                server = harness.DoclingServer(
                    self.scratch / f"mcp-{n}", self.cache_documents, extra, binary=self.topo.binary
                )
                # One cache folder for the whole pool: the worker reads the Docling JSON that
                # proves a batch from one folder (DOCLANE_SERVER_CACHE_DIR); a server writing
                # elsewhere leaves its batches unproven, converted again one by one.
                server.cache_dir = self.scratch / "mcp-0" / "cache"
                if not self.topo.stdio:
                    server.start()
                self.mcp.append(server)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for server in self.mcp:
            server.stop()
        if self.serve is not None:
            self.serve.stop()

    def worker_env(self) -> dict[str, str]:
        """What the pipeline's worker must be told on top of ``server``'s URL."""
        first = self.mcp[0]
        if self.topo.stdio:
            first.cache_dir.mkdir(parents=True, exist_ok=True)
            command = f"{self.topo.binary} --transport stdio"
            # The children inherit the worker's environment: their settings go there.
            return {
                "DOCLING_MCP_ORIGIN": "",
                "DOCLING_MCP_COMMAND": command,
                "DOCLING_MCP_CONVERSION_MODE": "local",
                "CACHE_DIR": str(first.cache_dir),
                "HF_HUB_OFFLINE": "1",
                "DOCLING_MCP_CACHE_MAX_DOCUMENTS": str(self.cache_documents),
            }
        return {"DOCLING_MCP_ORIGIN": ",".join(server.url for server in self.mcp)}


def serve_direct(files: list[Path], scratch: Path, workers: int, poll_s: float) -> Run:
    """docling-serve's own async API, ``workers`` tasks in flight, on a fresh server."""
    serve = ds.DoclingServe(scratch / "docling-serve", workers)
    serve.start()
    try:
        seconds, outcomes = ds.convert_all(serve.url, files, workers, poll_s)
    finally:
        serve.stop()
    run = Run("e-serve", seconds, len(files))
    for name, outcome in outcomes.items():
        if outcome.markdown is not None:
            run.markdown[name] = outcome.markdown
        else:
            run.failures[name] = outcome.failure or "?"
    return run


def plan(args: argparse.Namespace) -> list[tuple[str, Callable[[], Run]]]:
    """Every mode's name and how to measure it, in the order they run."""
    files: list[Path] = args.files
    scratch: Path = args.scratch
    broker: harness.Broker = args.broker
    modes: list[tuple[str, Callable[[], Run]]] = []

    def direct() -> Run:
        with Stack(TOPOLOGIES[0], scratch, args.cache_documents, args.serve_workers) as stack:
            return conversions.direct(files, stack.mcp[0])

    modes.append(("direct", direct))
    modes.append(
        ("e-serve", lambda: serve_direct(files, scratch, args.serve_workers, args.serve_poll_s))
    )
    for topo in TOPOLOGIES:
        for label, batch_docs in (("off", 1), (f"on{args.batch_docs}", args.batch_docs)):
            name = f"{topo.name}-c{topo.concurrency}-{label}"

            def one(topo: Topology = topo, batch_docs: int = batch_docs, name: str = name) -> Run:
                with Stack(topo, scratch, args.cache_documents, args.serve_workers) as stack:
                    return conversions.pipeline(
                        name,
                        files[0].parent,
                        len(files),
                        stack.mcp[0],
                        scratch,
                        batch_docs=batch_docs,
                        concurrency=topo.concurrency,
                        broker=broker,
                        env=stack.worker_env(),
                    )

            modes.append((name, one))
    modes += rs_modes(args)
    wanted = args.modes
    return [(name, fn) for name, fn in modes if not wanted or _wanted(name, wanted)]


def rs_modes(args: argparse.Namespace) -> list[tuple[str, Callable[[], Run]]]:
    """docling-rs-mcp's modes: direct clients, and the pipeline over HTTP and stdio (-c 2)."""
    files: list[Path] = args.files

    def server() -> rs.RsServer:
        return rs.RsServer(args.scratch / "rs", root=args.scratch, cpus=args.rs_cpus)

    def direct(mode: str, clients: int) -> Run:
        rs_server = server()
        rs_server.work.mkdir(exist_ok=True)
        rs_server.start()
        try:
            return rs.direct(mode, files, rs_server, clients)
        finally:
            rs_server.stop()

    def pipeline(mode: str, stdio: bool) -> Run:
        rs_server = server()
        rs_server.work.mkdir(exist_ok=True)
        if stdio:
            rs_server.cache_dir.mkdir(exist_ok=True)
            env = {"DOCLING_MCP_ORIGIN": "", "DOCLING_MCP_COMMAND": rs_server.stdio_command()}
        else:
            rs_server.start()
            env = {"DOCLING_MCP_ORIGIN": rs_server.url}
        env["DOCLANE_PROFILE"] = "docling-rs"
        # Rounds as a user gets them (the settings' defaults unless the bench is told otherwise):
        # the harness turns them off for the other modes, which compare a job at a time.
        default_docs = ProcessingSettings.model_fields["round_max_docs"].default
        env["DOCLANE_ROUND_MAX_DOCS"] = str(args.rs_round_docs or default_docs)
        if args.rs_server_concurrency:
            env["DOCLANE_SERVER_CONCURRENCY"] = str(args.rs_server_concurrency)
        try:
            return conversions.pipeline(
                mode, files[0].parent, len(files), rs_server, args.scratch,  # type: ignore[arg-type]
                batch_docs=1, concurrency=2, broker=args.broker, env=env,
            )  # fmt: skip
        finally:
            rs_server.stop()

    return [
        ("rs-direct", lambda: direct("rs-direct", 1)),
        ("rs-direct-x2", lambda: direct("rs-direct-x2", 2)),
        ("rs-http-c2", lambda: pipeline("rs-http-c2", stdio=False)),
        ("rs-stdio-c2", lambda: pipeline("rs-stdio-c2", stdio=True)),
    ]


def _wanted(name: str, wanted: list[str]) -> bool:
    """``a-http-c1-on`` names the batches-on mode whatever its batch size."""
    return any(name == w or (w.endswith("-on") and name.startswith(w[:-2] + "on")) for w in wanted)


def row(
    run: Run, direct: Run | None, serve: Run | None, rs_direct: Run | None = None
) -> dict[str, Any]:
    def same(base: Run | None) -> int | None:
        if base is None or base is run:
            return None
        return sum(1 for n, md in run.markdown.items() if base.markdown.get(n) == md)

    def differs(base: Run | None) -> list[str]:
        if base is None or base is run:
            return []
        return sorted(n for n, md in run.markdown.items() if base.markdown.get(n, md) != md)

    return {
        "mode": run.mode,
        "seconds": round(run.seconds, 2),
        "docs_per_s": round(run.rate, 2),
        "x_serve": round(run.rate / serve.rate, 2) if serve and serve.rate else None,
        "x_direct": round(run.rate / direct.rate, 2) if direct and direct.rate else None,
        "succeeded": len(run.markdown),
        "failed_by_code": dict(Counter(run.failures.values())),
        "not_finished": run.others,
        "md_same_as_direct": same(direct),
        "md_same_as_serve": same(serve),
        "md_same_as_rs_direct": same(rs_direct),
        "md_differs_from_direct": differs(direct),
        "md_differs_from_serve": differs(serve),
        "md_differs_from_rs_direct": differs(rs_direct),
        "batch_calls": len(run.batches),
        "failures": run.failures,
    }


def show(rows: list[dict[str, Any]], documents: int, refused: dict[str, str]) -> None:
    """One line a mode: the median round's figures; markdown counts are the worst round's."""

    def num(v: Any) -> str:
        return "-" if v is None else str(v)

    print(f"{documents} documents ({len(refused)} set aside: doclane submit refuses them)")
    head = f"{'mode':<22} {'docs/s':>7} {'x serve':>7} {'x direct':>8} {'ok':>4}"
    print(
        f"{head} {'md=direct':>9} {'md=serve':>8} {'md=rs':>6} {'batches':>7}  "
        "rounds (docs/s); failures"
    )
    for r in rows:
        print(
            f"{r['mode']:<22} {r['docs_per_s']:>7.2f} {num(r['x_serve']):>7} "
            f"{num(r['x_direct']):>8} {r['succeeded']:>4} {num(r['md_same_as_direct_min']):>9} "
            f"{num(r['md_same_as_serve_min']):>8} {num(r['md_same_as_rs_direct_min']):>6} "
            f"{r['batch_calls']:>7}  "
            f"{r['docs_per_s_rounds']}; {r['failed_by_code']}"
        )
    for r in rows:
        for cpu in r["cpu_ms_per_doc_rounds"]:  # the floor part by part, each round
            parts = ", ".join(f"{k} {v}" for k, v in cpu.items())
            print(f"{r['mode']} CPU ms a document: {parts}")
    for r in rows:
        for what in (
            "md_differs_from_direct",
            "md_differs_from_serve",
            "md_differs_from_rs_direct",
            "not_finished",
        ):
            if r[what]:
                print(f"{r['mode']} {what}: {r[what]}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=None, help="Default: bench/corpus.py's.")
    parser.add_argument("--smoke", action="store_true", help="Two documents a format, 4 modes.")
    parser.add_argument(
        "--per-format",
        type=int,
        default=18,
        help="The fixed subset: the first N documents of each format by name (0: all).",
    )
    parser.add_argument("--modes", default="", help="Comma-separated mode names (default: all).")
    parser.add_argument("--batch-docs", type=int, default=64, help="DOCLANE_BATCH_MAX_DOCS (on).")
    parser.add_argument("--serve-workers", type=int, default=2, help="docling-serve's engine.")
    parser.add_argument(
        "--serve-poll-s", type=float, default=0.02, help="e-serve's pause between status polls."
    )
    parser.add_argument("--rounds", type=int, default=1, help="Every mode N times, in turn.")
    parser.add_argument("--cache-documents", type=int, default=200, help="docling-mcp's cache.")
    parser.add_argument(
        "--rs-cpus",
        default="",
        help="Run docling-rs-mcp on these CPUs only (taskset -c, e.g. 0); run the "
        "bench itself under taskset -c 1, with PostgreSQL and Redis moved there too, to give "
        "the server a core of its own.",
    )
    parser.add_argument("--rs-round-docs", type=int, default=0, help="rs-*-c2 rounds (0: default).")
    parser.add_argument(
        "--rs-server-concurrency",
        type=int,
        default=0,
        help="DOCLANE_SERVER_CONCURRENCY of the rs-*-c2 modes (0: the setting's default).",
    )
    parser.add_argument(
        "--no-install", action="store_true", help="Fail if docling-serve is absent."
    )
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder (logs).")
    args = parser.parse_args()
    args.modes = [m for m in args.modes.split(",") if m] or (
        list(SMOKE_MODES) if args.smoke else []
    )
    return args


def subset(args: argparse.Namespace) -> Path:
    """The fixed subset (``--per-format``) as a folder of links: a run that fits in minutes.

    The whole corpus (about 300 documents) takes over half an hour through the eleven modes at
    one document per call; the first N of each format, sorted by name, are the same on every
    machine that builds the same corpus (bench/corpus.py prints its digest).
    """
    if args.corpus is None:
        source = Path(corpus_module.build(corpus_module.DEFAULT_DEST)["folder"])
    else:
        source = Path(args.corpus).expanduser().resolve()
    if args.per_format <= 0 or args.smoke:
        return source
    folder: Path = args.scratch / "subset"
    folder.mkdir()
    files = sorted(p for p in source.iterdir() if p.is_file())
    for fmt in corpus_module.FORMATS:
        for path in [p for p in files if p.suffix.lower() == f".{fmt}"][: args.per_format]:
            (folder / path.name).hardlink_to(path)
    return folder


def main() -> None:
    args = parse_args()
    if not Path(harness.DOCLING_MCP_BIN).exists():
        raise SystemExit(
            f"{harness.DOCLING_MCP_BIN} is missing: source scripts/lib.sh; ensure_docling_mcp"
        )
    needs_serve = not args.modes or any(m.startswith(("d-", "e-")) for m in args.modes)
    if (not args.modes or any(m.startswith("rs-") for m in args.modes)) and not Path(
        rs.RS_BIN
    ).exists():
        raise SystemExit(f"{rs.RS_BIN} is missing: source scripts/lib.sh; ensure_docling_rs_mcp")
    if needs_serve and not ds.installed():
        if args.no_install:
            raise SystemExit(
                f"{DOCLING_SERVE_BINARY} is missing: source scripts/lib.sh; ensure_docling_serve"
            )
        ds.ensure_installed()
    args.scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-topo-", dir=harness.TOOLS))
    print(f"scratch folder: {args.scratch}", file=sys.stderr)
    runs: dict[str, list[Run]] = {}
    args.broker = harness.claim_redis_db()
    try:
        args.corpus = subset(args)
        args.files, refused = harness.stage_corpus(args, args.scratch)
        modes = plan(args)
        for round_no in range(1, args.rounds + 1):  # A B C ... A B C: side by side, each round
            for name, measure in modes:
                run = measure()
                runs.setdefault(name, []).append(run)
                print(f"round {round_no} {name}: {run.rate:.2f} docs/s", file=sys.stderr)
    finally:
        args.broker.release()
        if not args.keep:
            shutil.rmtree(args.scratch, ignore_errors=True)
    medians = {name: median_run(rounds) for name, rounds in runs.items()}
    direct, serve = medians.get("direct"), medians.get("e-serve")
    rows = []
    for name, run in medians.items():
        rows.append(
            {
                **row(run, direct, serve, medians.get("rs-direct")),
                "docs_per_s_rounds": [round(r.rate, 2) for r in runs[name]],
                "cpu_ms_per_doc_rounds": [r.cpu_ms for r in runs[name] if r.cpu_ms],
                # Every round's markdown, not only the median's, must match (deterministic).
                "md_same_as_serve_min": min_same(runs[name], runs.get("e-serve")),
                "md_same_as_direct_min": min_same(runs[name], runs.get("direct")),
                "md_same_as_rs_direct_min": min_same(runs[name], runs.get("rs-direct")),
            }
        )
    if args.json:
        print(json.dumps({"documents": len(args.files), "refused": refused, "modes": rows}))
    else:
        show(rows, len(args.files), refused)


def median_run(rounds: list[Run]) -> Run:
    """The round whose rate is the median (the lower middle one for an even count)."""
    ordered = sorted(rounds, key=lambda r: r.rate)
    return ordered[(len(ordered) - 1) // 2]


def min_same(runs: list[Run], bases: list[Run] | None) -> int | None:
    """The fewest documents whose markdown equals the base's, over every pair of rounds."""
    if not bases or runs is bases:
        return None
    return min(
        sum(1 for n, md in run.markdown.items() if base.markdown.get(n) == md)
        for run in runs
        for base in bases
    )


if __name__ == "__main__":
    main()
