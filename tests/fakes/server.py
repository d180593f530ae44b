"""Run a fake Docling MCP server: ``python -m tests.fakes.server --port 0 [options]``.

With ``--transport stdio`` it serves MCP on its stdin/stdout instead (see ``tests.fakes.stdio``).

It binds 127.0.0.1 (port 0 picks a free one), and once it is listening prints its endpoint URL
(``http://127.0.0.1:PORT/mcp``) as the first line on stdout and, with ``--url-file``, writes it to
that file (atomically). With ``--exit-with-parent`` it stops when the process that started it
dies, so a killed test run leaves no server behind.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn

from pipeline.support import tracing
from tests.fakes.app import MCP_PATH, FakeServerOptions, build_app


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that announces its URL once listening and can follow its parent."""

    def __init__(
        self, config: uvicorn.Config, url: str, url_file: Path | None, parent_pid: int | None
    ) -> None:
        super().__init__(config)
        self.url = url
        self.url_file = url_file
        self.parent_pid = parent_pid

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit:
            return
        print(self.url, flush=True)
        if self.url_file is not None:
            partial = self.url_file.with_name(self.url_file.name + ".partial")
            partial.write_text(self.url + "\n")
            partial.replace(self.url_file)

    async def on_tick(self, counter: int) -> bool:
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            return True
        return await super().on_tick(counter)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.server", description=__doc__)
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument(
        "--knobs", default="", help="stdio: the knobs as a JSON object (no control API there)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--also-host", action="append", default=[], help="another Host header to admit (a proxy's)"
    )
    parser.add_argument("--profile", choices=("docling", "per-format"), default="docling")
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="answer with application/json instead of SSE (the default of the json_response knob)",
    )
    parser.add_argument("--url-file", type=Path, help="also write the URL to this file")
    parser.add_argument("--cache-dir", type=Path, help="where save_docling_document writes")
    parser.add_argument("--cache-max-documents", type=int, default=10)
    parser.add_argument("--exit-with-parent", action="store_true")
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    # With OTEL_EXPORTER_OTLP_ENDPOINT set, the SDK's server spans (its OpenTelemetry
    # middleware reads the trace context in each request's _meta) are exported: a server that
    # traces, joining the client's trace.
    tracing.configure("fake-docling-mcp")
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="fake-docling-cache-"))
    if args.transport == "stdio":
        from tests.fakes.stdio import serve_stdio

        serve_stdio(
            profile=args.profile,
            cache_dir=cache_dir,
            cache_max_documents=args.cache_max_documents,
            knobs=args.knobs,
        )
        return
    app, _state = build_app(
        FakeServerOptions(
            profile=args.profile,
            json_response=args.json_response,
            cache_dir=cache_dir,
            cache_max_documents=args.cache_max_documents,
            host=args.host,
            also_hosts=tuple(args.also_host),
        )
    )
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP (accepted
    # ones inherit it). Without it every reply on a kept-alive connection waited ~40 ms for the
    # client's delayed ACK (Nagle), which uvicorn's own listening socket never does.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        lifespan="on",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    server = _AnnouncingServer(
        config,
        url=f"http://{args.host}:{port}{MCP_PATH}",
        url_file=args.url_file,
        parent_pid=os.getppid() if args.exit_with_parent else None,
    )
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
