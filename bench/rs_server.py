"""docling-rs-mcp for the topologies bench: the direct clients doclane is held to.

The server is the harness's (:class:`bench.harness.docling_rs.RsServer`: the soak runs it too);
``direct`` converts the corpus with doclane's own MCP client and the docling-rs profile
(``convert{uri, to: md}``, tables padded as docling pads them), one call at a time per client,
``clients`` clients at once, each in a process of its own: the baselines ``doclane worker -c 2``
over the same server is compared with.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from bench.harness.conversions import Run
from bench.harness.docling_rs import RS_BIN, RsServer
from bench.harness.processes import cpu_by_part, per_document_ms
from errors import PipelineError
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.profiles.base import ConversionRequest, ToolCalls
from pipeline.profiles.docling_rs import DoclingRsProfile

__all__ = ["RS_BIN", "RsServer", "direct"]


def direct(mode: str, files: list[Path], server: RsServer, clients: int = 1) -> Run:
    """``clients`` direct callers, each a process of its own with its own client, each taking
    the next file from one shared queue as it frees.

    Processes, not threads: two users' clients do not share an interpreter lock, and the
    pipeline's two worker processes do not either. A shared queue, not a fixed share: with fixed
    shares one caller idles once its share is done while the other still has large documents.
    The clock starts when every caller has shaken hands and ends when the last one is done."""
    context = multiprocessing.get_context("fork")
    queue: Queue[str | None] = context.Queue()
    outcomes: Queue[tuple[float, dict[str, str], dict[str, str]]] = context.Queue()
    for path in files:
        queue.put(str(path))
    for _ in range(clients):
        queue.put(None)
    ready = context.Barrier(clients + 1)
    callers = [
        context.Process(target=_caller, args=(server.url, queue, ready, outcomes))
        for _ in range(clients)
    ]
    for caller in callers:
        caller.start()
    server_pid = server.proc.pid if server.proc is not None else None
    try:
        ready.wait(timeout=60)
        # the clients are counted whole once joined (their handshakes too: a few ms in all)
        cpu = cpu_by_part(None, server_pid)
        started = time.monotonic()
        results = [outcomes.get(timeout=3600) for _ in callers]
    finally:
        for caller in callers:
            caller.join(timeout=10)
    run = Run(mode, max(ended for ended, _, _ in results) - started, len(files))
    run.cpu_ms = per_document_ms(cpu, cpu_by_part(None, server_pid), len(files))
    for _, markdown, failures in results:
        run.markdown.update(markdown)
        run.failures.update(failures)
    return run


def _caller(
    url: str,
    queue: Queue[str | None],
    ready: Barrier,
    outcomes: Queue[tuple[float, dict[str, str], dict[str, str]]],
) -> None:
    """One direct caller (in its own process): its end time, markdown and failures by name go
    to ``outcomes``."""
    profile = DoclingRsProfile()
    markdown: dict[str, str] = {}
    failures: dict[str, str] = {}
    with McpClient(url, settings=McpSettings(request_timeout_s=300)) as client:
        client.initialize()  # the handshakes are not part of the figure
        client.tools()
        ready.wait()
        while (name := queue.get()) is not None:
            path = Path(name)
            request = ConversionRequest(
                source=name, kind="file", suffix=path.suffix, formats=("md",),
                size_bytes=path.stat().st_size,
            )  # fmt: skip
            try:
                converted = profile.convert(ToolCalls(client), request)
            except PipelineError as exc:
                failures[path.name] = exc.code
            else:
                markdown[path.name] = converted.outputs["md"]
        ended = time.monotonic()
    outcomes.put((ended, markdown, failures))
