"""docling-rs-mcp for the topologies bench: the server, and the direct clients doclane is held to.

``RsServer`` starts one docling-rs-mcp over Streamable HTTP (as scripts/lib.sh's
``start_docling_rs_mcp`` does), reading only under ``root``; ``direct`` converts the corpus with
doclane's own MCP client and the docling-rs profile (``convert{uri, to: md}``, tables padded as
docling pads them), one call at a time per client, ``clients`` clients at once on their own
threads: the baselines ``doclane worker -c 2`` over the same server is compared with.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
import time
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
