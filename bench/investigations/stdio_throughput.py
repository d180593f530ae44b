"""Real docling-mcp throughput: stdio children (1 and 2 processes) against one HTTP server.

The corpus is ``--rounds`` unique copies of the six samples in examples/ (docling-mcp caches by
content digest, so every copy differs by a few bytes: a trailing line, comment or byte, and
each still converts). A *document* is convert + export to markdown, as a worker does it.

- ``http``: one ``docling-mcp-server --transport streamable-http``, ``C`` client threads;
- ``stdio``: ``P`` processes, each with its own ``docling-mcp-server --transport stdio`` child;
- ``--batch``: each caller converts its share with one ``convert_directory_files_into_docling_
  document`` call, then exports each document (what doclane's batches do for small files).

Start-up (the server's 6 s, each client's handshake) is not timed: the clock runs from the
moment every caller is ready to the last export. Figures go to docs/benchmarks.md.

    .venv/bin/python -m bench.investigations.stdio_throughput
        [--rounds 5] [--modes http:1,...] [--batch] [--json]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import DOCLING_MCP_BIN, ROOT, free_port, print_json
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings

CONVERT = "convert_document_into_docling_document"
CONVERT_DIR = "convert_directory_files_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


def server_environment(cache_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DOCLING_MCP_CONVERSION_MODE": "local",
        "HF_HUB_OFFLINE": "1",
        "CACHE_DIR": str(cache_dir),
        "DOCLING_MCP_CACHE_MAX_DOCUMENTS": "1000",
    }


def make_corpus(folder: Path, rounds: int) -> list[Path]:
    """``rounds`` unique copies of each sample (a distinct digest each)."""
    paths = []
    for n in range(rounds):
        for sample in sorted((ROOT / "examples").iterdir()):
            if sample.suffix == ".pdf":  # docling-mcp cannot convert PDFs offline
                continue
            target = folder / f"{sample.stem}-{n}{sample.suffix}"
            data = sample.read_bytes()
            if sample.suffix == ".md":
                data += f"\n\nCopy {n}.\n".encode()
            elif sample.suffix == ".csv":
                data += f"copy,{n}\n".encode() if data.endswith(b"\n") else f"\ncopy,{n}\n".encode()
            elif sample.suffix == ".html":
                data += f"\n<!-- copy {n} -->\n".encode()
            else:  # a zip (docx, xlsx, pptx): bytes after the end record are ignored
                data += b"\0" * (n + 1)
            target.write_bytes(data)
            paths.append(target)
    return paths


def work(client: McpClient, share: list[Path], batch: bool) -> int:
    if not share:
        return 0
    if batch:
        folder = share[0].parent
        result = client.call_tool(CONVERT_DIR, {"source": str(folder)}, timeout=600)
        assert result.structured is not None, result.text
        keys = [item["document_key"] for item in result.structured["result"]]
    else:
        keys = []
        for path in share:
            converted = client.call_tool(CONVERT, {"source": str(path)}, timeout=600)
            assert converted.structured is not None, (path, converted.text)
            keys.append(converted.structured["document_key"])
    for key in keys:
        exported = client.call_tool(EXPORT, {"document_key": key}, timeout=600)
        assert exported.structured is not None and exported.structured["markdown"]
    return len(keys)


def stdio_caller(
    share: list[str], *, batch: bool, cache_dir: str, ready: Any, results: Any, index: int
) -> None:
    os.environ.update(server_environment(Path(cache_dir)))
    command = shlex.join([DOCLING_MCP_BIN, "--transport", "stdio"])
    settings = McpSettings(command=command, request_timeout_s=120)
    with McpClient(settings=settings) as client:
        client.initialize()
        ready.wait()
        results[index] = work(client, [Path(p) for p in share], batch)


def split(paths: list[Path], parts: int, batch: bool, folder: Path) -> list[list[Path]]:
    shares = [paths[i::parts] for i in range(parts)]
    if not batch:
        return shares
    moved = []
    for n, share in enumerate(shares):  # one directory per caller
        own = folder / f"share-{n}"
        own.mkdir()
        moved.append([Path(shutil.copy2(p, own / p.name)) for p in share])
    return moved


def run_stdio(paths: list[Path], processes: int, batch: bool, folder: Path) -> tuple[int, float]:
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(processes + 1)
    results = context.Manager().dict()
    shares = split(paths, processes, batch, folder)
    workers = [
        context.Process(
            target=stdio_caller,
            args=([str(p) for p in share],),
            kwargs={
                "batch": batch,
                "cache_dir": str(folder / "cache"),
                "ready": ready,
                "results": results,
                "index": n,
            },
        )
        for n, share in enumerate(shares)
    ]
    for process in workers:
        process.start()
    ready.wait()
    started = time.monotonic()
    for process in workers:
        process.join()
    return sum(results.values()), time.monotonic() - started


def run_http(paths: list[Path], callers: int, batch: bool, folder: Path) -> tuple[int, float]:
    port = free_port()
    server = subprocess.Popen(
        [
            DOCLING_MCP_BIN,
            "--transport",
            "streamable-http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=server_environment(folder / "cache"),
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        settings = McpSettings(origin=f"http://127.0.0.1:{port}", request_timeout_s=120)
        clients: list[McpClient] = []
        deadline = time.monotonic() + 120
        while not clients:
            try:
                probe = McpClient(settings=settings)
                probe.initialize()
                clients.append(probe)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # the server is starting (about 6 s)
        while len(clients) < callers:
            client = McpClient(settings=settings)
            client.initialize()
            clients.append(client)
        shares = split(paths, callers, batch, folder)
        counts = [0] * callers

        def call(n: int) -> None:
            counts[n] = work(clients[n], shares[n], batch)

        threads = [threading.Thread(target=call, args=(n,)) for n in range(callers)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        for client in clients:
            client.close()
        return sum(counts), elapsed
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="http:1,http:2,stdio:1,stdio:2")
    parser.add_argument("--batch", action="store_true")
    parser.add_argument("--json", action="store_true", help="the table on stderr, JSON on stdout")
    args = parser.parse_args()
    table = sys.stderr if args.json else sys.stdout
    header = (
        f"| topology | callers | documents | seconds | docs/s |{' batch' if args.batch else ''}"
    )
    print(header, file=table)
    rows: list[dict[str, Any]] = []
    for mode in args.modes.split(","):
        kind, _, count = mode.partition(":")
        with tempfile.TemporaryDirectory(prefix="stdio-bench-") as scratch:
            folder = Path(scratch)
            (folder / "cache").mkdir()
            (folder / "corpus").mkdir()
            paths = make_corpus(folder / "corpus", args.rounds)
            runner = run_stdio if kind == "stdio" else run_http
            done, elapsed = runner(paths, int(count), args.batch, folder)
        print(
            f"| {kind} | {count} | {done} | {elapsed:.1f} | {done / elapsed:.2f} |",
            file=table,
            flush=True,
        )
        rate = round(done / elapsed, 2)
        rows.append({"topology": kind, "callers": int(count), "documents": done,
                     "seconds": round(elapsed, 2), "docs_per_s": rate})  # fmt: skip
    if args.json:
        print_json({"rounds": args.rounds, "batch": args.batch, "modes": rows})


if __name__ == "__main__":
    main()
