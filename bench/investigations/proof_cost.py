"""What the proof of a batch costs, per document: Docling JSON bytes per source byte, by format.

A batch's keys are proven by ``save_docling_document`` (pipeline/profiles/docling_batch.py),
which serialises the whole document as markdown and JSON on the server. For most documents
that is milliseconds; for a table it is seconds (each cell becomes a JSON object). This bench
measures, on the real-world corpus of ``bench/corpus.py`` and one local docling-mcp 3.3.0:

- per document: format, source bytes, saved JSON bytes, the save call's seconds, and the
  worker's cost of reading the proof (the whole file parsed, against only its ``origin``);
- per format: the median and largest JSON/source ratio, and how many saves cost more than the
  call a batch saves (``--call-s``, docling-mcp's fixed cost of one convert call);
- the smallest tabular (CSV/XLSX) document whose save costs more than that call: the figure
  ``DOCLANE_BATCH_MAX_TABLE_BYTES`` is chosen from.

    .venv/bin/python -m bench.investigations.proof_cost
        [--corpus DIR] [--call-s 0.3] [--json] [--smoke]

The whole corpus goes through one directory call (cache large enough to hold it); each key is
then saved once and matched to its file by the saved ``origin``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import corpus as corpus_module
from bench.harness import DOCLING_MCP_BIN, TOOLS, DoclingServer, choose_files
from pipeline.mcp.client import McpClient
from pipeline.profiles.base import ToolCalls, require_str, structured
from pipeline.profiles.docling_batch import CONVERT_DIRECTORY
from pipeline.profiles.docling_mcp import SAVE
from pipeline.profiles.saved_origin import read_origin

TABULAR = ("csv", "xlsx")


def measure(files: list[Path], server: DoclingServer) -> list[dict[str, Any]]:
    by_name = {p.name: p for p in files}
    rows: list[dict[str, Any]] = []
    with McpClient(server.url) as client:
        client.initialize()
        result = ToolCalls(client).call(
            CONVERT_DIRECTORY, {"source": str(files[0].parent)}, stage="convert", timeout=3600
        )
        items = structured(result, CONVERT_DIRECTORY)["result"]
        for item in items:
            key = item["document_key"]
            started = time.perf_counter()
            saved = ToolCalls(client).call(SAVE, {"document_key": key}, stage="export")
            save_s = time.perf_counter() - started
            path = Path(require_str(structured(saved, SAVE), "json_file", SAVE))
            started = time.perf_counter()
            whole = json.loads(path.read_bytes())
            parse_s = time.perf_counter() - started
            started = time.perf_counter()
            origin = read_origin(path, limit=1 << 40)
            origin_s = time.perf_counter() - started
            assert origin == whole["origin"], (origin, whole["origin"])
            source = by_name[str(origin["filename"])]
            rows.append(
                {
                    "name": source.name,
                    "format": source.suffix.lower().lstrip("."),
                    "source_bytes": source.stat().st_size,
                    "json_bytes": path.stat().st_size,
                    "save_s": round(save_s, 4),
                    "read_whole_s": round(parse_s, 4),
                    "read_origin_s": round(origin_s, 6),
                }
            )
            path.unlink()
            path.with_suffix(".md").unlink(missing_ok=True)
    return rows


def summarise(rows: list[dict[str, Any]], call_s: float) -> dict[str, Any]:
    per_format: dict[str, Any] = {}
    for fmt in corpus_module.FORMATS:
        mine = [r for r in rows if r["format"] == fmt]
        if not mine:
            continue
        ratios = [r["json_bytes"] / max(r["source_bytes"], 1) for r in mine]
        per_format[fmt] = {
            "documents": len(mine),
            "ratio_median": round(statistics.median(ratios), 1),
            "ratio_max": round(max(ratios), 1),
            "save_s_median": round(statistics.median(r["save_s"] for r in mine), 4),
            "save_s_total": round(sum(r["save_s"] for r in mine), 2),
            "saves_over_call": sum(1 for r in mine if r["save_s"] > call_s),
        }
    costly = sorted((r for r in rows if r["save_s"] > call_s), key=lambda r: -r["save_s"])
    tabular_costly = [r["source_bytes"] for r in costly if r["format"] in TABULAR]
    tabular_cheap = [
        r["source_bytes"] for r in rows if r["format"] in TABULAR and r["save_s"] <= call_s
    ]
    return {
        "documents": len(rows),
        "save_s_total": round(sum(r["save_s"] for r in rows), 2),
        "read_whole_s_total": round(sum(r["read_whole_s"] for r in rows), 2),
        "read_origin_s_total": round(sum(r["read_origin_s"] for r in rows), 4),
        "per_format": per_format,
        "saves_over_call": costly,
        "smallest_costly_tabular_bytes": min(tabular_costly, default=None),
        "largest_cheap_tabular_bytes": max(tabular_cheap, default=None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--call-s", type=float, default=0.3, help="One convert call's fixed cost.")
    parser.add_argument("--smoke", action="store_true", help="Two documents of each format.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not Path(DOCLING_MCP_BIN).exists():
        raise SystemExit(f"{DOCLING_MCP_BIN} is missing: source scripts/lib.sh; ensure_docling_mcp")
    if args.corpus is None:
        source = Path(corpus_module.build(corpus_module.DEFAULT_DEST)["folder"])
    else:
        source = args.corpus.expanduser().resolve()
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-proof-", dir=TOOLS))
    try:
        folder = scratch / "corpus"
        folder.mkdir()
        for path in choose_files(source, args.smoke):
            shutil.copyfile(path, folder / path.name)
        files = sorted(folder.iterdir())
        server = DoclingServer(scratch, cache_documents=len(files) + 10)
        server.start()
        try:
            rows = measure(files, server)
        finally:
            server.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = summarise(rows, args.call_s)
    if args.json:
        print(json.dumps({"summary": summary, "documents": rows}))
        return
    print(f"{summary['documents']} documents converted; saves {summary['save_s_total']} s")
    print(
        f"worker reads: whole JSON parsed {summary['read_whole_s_total']} s, "
        f"origin only {summary['read_origin_s_total']} s"
    )
    print(f"{'format':<6} {'docs':>5} {'json/src med':>12} {'max':>8} {'save med s':>10} "
          f"{'save tot s':>10} {'> call':>6}")  # fmt: skip
    for fmt, row in summary["per_format"].items():
        print(
            f"{fmt:<6} {row['documents']:>5} {row['ratio_median']:>12} {row['ratio_max']:>8} "
            f"{row['save_s_median']:>10} {row['save_s_total']:>10} {row['saves_over_call']:>6}"
        )
    print(f"saves over {args.call_s} s:")
    for r in summary["saves_over_call"]:
        print(f"  {r['save_s']:>7.2f} s  {r['format']:<5} {r['source_bytes']:>8} B -> "
              f"{r['json_bytes']:>10} B  {r['name']}")  # fmt: skip
    print(
        f"tabular: smallest costly {summary['smallest_costly_tabular_bytes']} B, "
        f"largest cheap {summary['largest_cheap_tabular_bytes']} B"
    )


if __name__ == "__main__":
    main()
