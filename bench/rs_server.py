"""docling-rs-mcp for the topologies bench: the direct clients doclane is held to.

The server is the harness's (:class:`bench.harness.docling_rs.RsServer`: the soak runs it too);
``direct`` converts the corpus with doclane's own MCP client and the docling-rs profile
(``convert{uri, to: md}``, tables padded as docling pads them), one call at a time per client,
``clients`` clients at once on their own threads: the baselines ``doclane worker -c 2`` over
the same server is compared with.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from bench.harness.conversions import Run
from bench.harness.docling_rs import RS_BIN, RsServer
from errors import PipelineError
from pipeline.mcp import McpClient, McpSettings
from pipeline.profiles import ConversionRequest, DoclingRsProfile

__all__ = ["RS_BIN", "RsServer", "direct"]


def direct(mode: str, files: list[Path], server: RsServer, clients: int = 1) -> Run:
    """``clients`` direct callers, each with its own client and its share of the files."""
    run = Run(mode, 0.0, len(files))
    profile = DoclingRsProfile()
    opened = [
        McpClient(server.url, settings=McpSettings(request_timeout_s=300)) for _ in range(clients)
    ]
    lock = threading.Lock()

    def convert(client: McpClient, share: list[Path]) -> None:
        for path in share:
            request = ConversionRequest(
                source=str(path), kind="file", suffix=path.suffix, formats=("md",),
                size_bytes=path.stat().st_size,
            )  # fmt: skip
            try:
                markdown = profile.convert(client, request, lambda _call: None).outputs["md"]
            except PipelineError as exc:
                with lock:
                    run.failures[path.name] = exc.code
            else:
                with lock:
                    run.markdown[path.name] = markdown

    try:
        for client in opened:
            client.initialize()  # the handshakes are not part of the figure
            client.tools()
        threads = [
            threading.Thread(target=convert, args=(client, files[n::clients]))
            for n, client in enumerate(opened)
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        run.seconds = time.monotonic() - started
    finally:
        for client in opened:
            client.close()
    return run
