"""docling-rs-mcp for the topologies bench: the server, and the direct clients doclane is held to.

``RsServer`` starts one docling-rs-mcp over Streamable HTTP (as scripts/lib.sh's
``start_docling_rs_mcp`` does), reading only under ``root``; ``direct`` converts the corpus with
doclane's own MCP client and the docling-rs profile (``convert{uri, to: md}``, tables padded as
docling pads them), one call at a time per client, ``clients`` clients at once, each in a process of
its own: the baselines ``doclane worker -c 2`` over the same server is compared with.
"""

from __future__ import annotations

import multiprocessing
import shlex
import subprocess
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from bench import harness
from bench.harness.conversions import Run
from errors import PipelineError
from pipeline.mcp import McpClient, McpSettings
from pipeline.profiles import ConversionRequest, DoclingRsProfile
from tests.support.tools import DOCLING_RS_MCP_BIN

RS_BIN = DOCLING_RS_MCP_BIN


class RsServer:
    """One docling-rs-mcp over HTTP on a free port; ``cache_dir`` only satisfies the pipeline's
    helper (this server saves nothing)."""

    def __init__(self, work: Path, root: Path) -> None:
        self.work = work
        self.root = root
        self.cache_dir = work / "unused-cache"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def command(self) -> list[str]:
        return [RS_BIN, "--root", str(self.root)]

    def stdio_command(self) -> str:
        """``DOCLING_MCP_COMMAND`` for a child per worker process (stdio: the default)."""
        return shlex.join(self.command())

    def start(self) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        port = harness.free_port()
        with open(self.work / "server.log", "ab") as logfile:
            self.proc = subprocess.Popen(
                [*self.command(), "--http", "--port", str(port)],
                cwd=self.work,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not harness.port_open(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"docling-rs-mcp did not listen (log: {self.work / 'server.log'})")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            harness.stop_group(proc, 20)


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
    try:
        ready.wait(timeout=60)
        started = time.monotonic()
        results = [outcomes.get(timeout=3600) for _ in callers]
    finally:
        for caller in callers:
            caller.join(timeout=10)
    run = Run(mode, max(ended for ended, _, _ in results) - started, len(files))
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
                converted = profile.convert(client, request, lambda _call: None)
            except PipelineError as exc:
                failures[path.name] = exc.code
            else:
                markdown[path.name] = converted.outputs["md"]
        ended = time.monotonic()
    outcomes.put((ended, markdown, failures))
