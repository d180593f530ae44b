"""docling-rs-mcp as the benches run it: one server over Streamable HTTP, or its stdio command.

``RsServer`` starts one docling-rs-mcp over HTTP (as scripts/lib.sh's ``start_docling_rs_mcp``
does), reading only under ``root``. Its port is chosen at the first start and kept, so a server
stopped and started again (the soak's outage) answers where its clients look for it.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from bench.harness.processes import free_port, port_open, stop_group
from tests.support.tools import DOCLING_RS_MCP_BIN

RS_BIN = DOCLING_RS_MCP_BIN


class RsServer:
    """One docling-rs-mcp over HTTP on a free port; ``cache_dir`` only satisfies the pipeline's
    helper (this server saves nothing)."""

    def __init__(self, work: Path, root: Path, cpus: str = "") -> None:
        """``cpus``: the server (over HTTP, or each stdio child) runs on these CPUs only
        (``taskset -c``; empty: anywhere), so a bench can give it a core of its own while
        everything else shares the other."""
        self.work = work
        self.root = root
        self.cpus = cpus
        self.cache_dir = work / "unused-cache"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.port = 0

    def command(self) -> list[str]:
        pinned = ["taskset", "-c", self.cpus] if self.cpus else []
        return [*pinned, RS_BIN, "--root", str(self.root)]

    def stdio_command(self) -> str:
        """``DOCLING_MCP_COMMAND`` for a child per worker process (stdio: the default)."""
        return shlex.join(self.command())

    def start(self) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        port = self.port = self.port or free_port()
        with open(self.work / "server.log", "ab") as logfile:
            self.proc = subprocess.Popen(
                [*self.command(), "--http", "--port", str(port)],
                cwd=self.work,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not port_open(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"docling-rs-mcp did not listen (log: {self.work / 'server.log'})")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            stop_group(proc, 20)
