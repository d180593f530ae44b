"""Real conversions side by side: one document per call, the pipeline with and without batches.

The goals of docs/benchmarks.md's batch figures (batches at least 5x one document per call; the
pipeline at least 0.95x direct calls with batches off, 5x with batches on, markdown identical), on
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

    .venv/bin/python -m bench.batch_throughput [--smoke] [--batch-docs 8,32] [--concurrency 1]
        [--rounds 2] [--no-off] [--round-docs 1,8] [--server-concurrency fit,2]

``--round-docs`` runs every pipeline mode with each ``DOCLANE_ROUND_MAX_DOCS`` (1, the default:
rounds off, a job at a time), and each size above 1 with each ``--server-concurrency``
(``fit``, the default: unset, as many at once as the server runs).

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
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import (
    DOCLING_MCP_BIN,
    TOOLS,
    DoclingServer,
    claim_redis_db,
    stage_corpus,
)
from bench.harness.conversions import Run, compare, direct, pipeline


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
        "--round-docs",
        default="1",
        help="DOCLANE_ROUND_MAX_DOCS of every pipeline mode, comma-separated (1: rounds off).",
    )
    parser.add_argument(
        "--server-concurrency",
        default="fit",
        help="DOCLANE_SERVER_CONCURRENCY of the modes in rounds, comma-separated ('fit': unset, "
        "what the server runs at once).",
    )
    parser.add_argument(
        "--no-off", action="store_true", help="Skip the batches-off mode (direct is always run)."
    )
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder (logs).")
    return parser.parse_args()


def measure(args: argparse.Namespace, files: list[Path], scratch: Path) -> list[Run]:
    """Direct calls first, then each pipeline mode, the server restarted before each."""
    batch_sizes = [int(b) for b in args.batch_docs.split(",") if b.strip()]
    if args.smoke:
        batch_sizes = batch_sizes[:1]
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    plan = [] if args.no_off else [(f"off-c{c}", 1, c) for c in concurrencies]
    plan += [(f"on{b}-c{c}", b, c) for b in batch_sizes for c in concurrencies]
    modes = [
        (f"{mode}{suffix}", batch_docs, concurrency, env)
        for mode, batch_docs, concurrency in plan
        for suffix, env in round_settings(args)
    ]
    broker = claim_redis_db()
    server = DoclingServer(scratch, args.cache_documents)
    runs: list[Run] = []
    try:
        server.start()
        runs.append(direct(files, server))
        print(f"direct: {runs[-1].rate:.2f} docs/s", file=sys.stderr)
        for mode, batch_docs, concurrency, env in modes:
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
                env=env,
            )
            runs.append(run)
            print(f"{mode}: {run.rate:.2f} docs/s", file=sys.stderr)
    finally:
        server.stop()
        broker.release()
    return runs


def round_settings(args: argparse.Namespace) -> list[tuple[str, dict[str, str]]]:
    """Each rounds variant of a pipeline mode: its name's suffix and its settings. Rounds off
    (1) is the mode's plain name; ``-r8`` rounds of 8 with the concurrency fitted to the
    server; ``-r8-s2`` with ``DOCLANE_SERVER_CONCURRENCY=2``."""
    variants: list[tuple[str, dict[str, str]]] = []
    for docs in (int(d) for d in args.round_docs.split(",") if d.strip()):
        if docs <= 1:
            variants.append(("", {"DOCLANE_ROUND_MAX_DOCS": "1"}))
            continue
        for each in (c.strip() for c in args.server_concurrency.split(",") if c.strip()):
            env = {"DOCLANE_ROUND_MAX_DOCS": str(docs)}
            if each != "fit":
                env["DOCLANE_SERVER_CONCURRENCY"] = each
            variants.append((f"-r{docs}" + (f"-s{each}" if each != "fit" else ""), env))
    return variants


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
        f"{'mode':<14} {'s':>7} {'docs/s':>7} {'x direct':>8} {'ok':>4} {'fail':>4} "
        f"{'md same':>7} {'md diff':>7} {'code diff':>9} {'batches':>7} {'in batch':>8}"
    )
    for row in rows:
        print(
            f"{row['mode']:<14} {row['seconds']:>7.1f} {row['docs_per_s']:>7.2f} "
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
        print(f"  {mode:<14} {rate:>7.2f} docs/s {ratio:>6.2f}x direct")


if __name__ == "__main__":
    main()
