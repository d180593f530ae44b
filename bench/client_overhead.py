"""The MCP client's own cost: 2,000 trivial ``tools/call`` by three clients, side by side.

The client-overhead figure of docs/benchmarks.md. One fake docling server
(``tests.fakes.server``, built on the official ``mcp`` SDK, in a process of its own) answers
``check_document_in_local_cache`` at once, with structured content checked against the tool's
``outputSchema``. Three contestants make the same sequential calls to it, each in a fresh
process, alternating A B C A B C ... for ``--rounds``:

1. ``doclane``: ``pipeline.mcp.client.McpClient``, as a worker uses it (``initialize()``, then
   ``call_tool``: registry lookup, argument and output schema checks, deadline, size bound);
2. ``sdk``: the official ``mcp`` SDK's ``Client(url, mode="auto")`` over streamable HTTP;
3. ``bare``: a plain ``httpx.Client`` loop doing the same handshake and sending the same
   JSON-RPC and headers, parsing the reply just enough to find the result (no checks at all).

Both protocol revisions: ``2025-11-25`` (the fake's session mode: every client's ``auto``
falls back to ``initialize``) and ``2026-07-28`` (the fake's ``stateless`` knob: discovery,
no session, every request stamped with ``_meta`` and the routing headers). The handshake is
made, then only the calls are timed. Figures go to docs/benchmarks.md.

    .venv/bin/python -m bench.client_overhead [--smoke] [--calls 2000] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import ROOT, FakeServer

TOOL = "check_document_in_local_cache"
ARGUMENTS = {"document_key": "0123456789abcdef"}
CONTESTANTS = ("doclane", "sdk", "bare")
REVISIONS = {"2025-11-25": False, "2026-07-28": True}  # revision -> the fake's stateless knob
GOAL_SDK = 0.8
GOAL_BARE = 1.15


# ---- the contestants (each runs in a process of its own: ``--one NAME``) ---------------------
class Clock:
    """Wall time and this process's CPU time (every thread: the SDK's event loop, doclane's
    watchdog) of the timed loop. On a shared machine the CPU time is the steadier measure of a
    client's own cost: the wall time also holds the server's time and other people's load."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


Outcome = tuple[Clock, str]


def run_doclane(url: str, calls: int) -> Outcome:
    from pipeline.mcp.client import McpClient
    from pipeline.settings.tree import read_settings

    with McpClient(url, settings=read_settings().mcp) as client:
        client.initialize()
        client.call_tool(TOOL, ARGUMENTS)  # warm: the first call's imports and connection
        with Clock() as clock:
            for _ in range(calls):
                result = client.call_tool(TOOL, ARGUMENTS)
                if result.is_error:
                    raise SystemExit(f"doclane: the tool failed: {result.raw}")
        return clock, client.negotiated_version or "?"


def run_sdk(url: str, calls: int) -> Outcome:
    from mcp.client.client import Client

    async def main() -> Outcome:
        async with Client(url, mode="auto") as client:
            await client.call_tool(TOOL, ARGUMENTS)
            with Clock() as clock:
                for _ in range(calls):
                    result = await client.call_tool(TOOL, ARGUMENTS)
                    if result.is_error:
                        raise SystemExit(f"sdk: the tool failed: {result}")
            return clock, str(client.session.protocol_version)

    return asyncio.run(main())


class BareClient:
    """JSON-RPC over ``httpx.Client.post``: the handshake and calls, nothing checked."""

    def __init__(self, url: str, modern: bool) -> None:
        self.url = url
        self.modern = modern
        self.http = httpx.Client(timeout=30)
        self.ids = 0
        self.session: str | None = None
        self.version = "2026-07-28" if modern else "2025-11-25"

    def request(self, method: str, params: dict[str, Any], notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.ids += 1
            message["id"] = self.ids
        headers = {"Accept": "application/json, text/event-stream"}
        if method != "initialize":
            headers["MCP-Protocol-Version"] = self.version
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if self.modern:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientInfo": {"name": "bare", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers["Mcp-Method"] = method
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        response = self.http.post(self.url, json=message, headers=headers)
        if notify:
            return None
        if self.session is None and "mcp-session-id" in response.headers:
            self.session = response.headers["mcp-session-id"]
        body = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data: ") and '"id"' in line:
                    return json.loads(line[6:])["result"]
            raise SystemExit(f"bare: no response in {body[:200]!r}")
        return json.loads(body)["result"]

    def handshake(self) -> None:
        if self.modern:
            self.request("server/discover", {})
        else:
            self.request(
                "initialize",
                {
                    "protocolVersion": self.version,
                    "capabilities": {},
                    "clientInfo": {"name": "bare", "version": "0"},
                },
            )
            self.request("notifications/initialized", {}, notify=True)
        self.request("tools/list", {})


def run_bare(url: str, calls: int, modern: bool) -> Outcome:
    client = BareClient(url, modern)
    client.handshake()
    client.request("tools/call", {"name": TOOL, "arguments": dict(ARGUMENTS)})
    with Clock() as clock:
        for _ in range(calls):
            result = client.request("tools/call", {"name": TOOL, "arguments": dict(ARGUMENTS)})
            if result.get("isError"):
                raise SystemExit(f"bare: the tool failed: {result}")
    client.http.close()
    return clock, client.version


def one(name: str, url: str, calls: int, modern: bool) -> None:
    runners: dict[str, Callable[[], Outcome]] = {
        "doclane": lambda: run_doclane(url, calls),
        "sdk": lambda: run_sdk(url, calls),
        "bare": lambda: run_bare(url, calls, modern),
    }
    clock, version = runners[name]()
    print(json.dumps({"seconds": clock.wall, "cpu_seconds": clock.cpu, "version": version}))


# ---- the driver --------------------------------------------------------------------------------
def spawn(name: str, url: str, calls: int, modern: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.client_overhead", "--one", name, "--url", url]
    command += ["--calls", str(calls)]
    if modern:
        command.append("--modern")
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(calls: int, rounds: int) -> dict[str, Any]:
    report: dict[str, Any] = {"calls": calls, "rounds": rounds, "revisions": {}}
    with (
        tempfile.TemporaryDirectory(prefix="doclane-bench-client-") as scratch,
        FakeServer(Path(scratch)) as server,
    ):
        url = server.url
        for revision, stateless in REVISIONS.items():
            server.configure(stateless=stateless)
            times: dict[str, list[float]] = {name: [] for name in CONTESTANTS}
            cpu: dict[str, list[float]] = {name: [] for name in CONTESTANTS}
            versions: dict[str, str] = {}
            for _round in range(rounds):
                for name in CONTESTANTS:
                    outcome = spawn(name, url, calls, stateless)
                    times[name].append(outcome["seconds"])
                    cpu[name].append(outcome["cpu_seconds"])
                    versions[name] = outcome["version"]
            wall = {name: statistics.median(values) for name, values in times.items()}
            own = {name: statistics.median(values) for name, values in cpu.items()}
            report["revisions"][revision] = {
                "negotiated": versions,
                "seconds": times,
                "cpu_seconds": cpu,
                "median_ms_per_call": {n: 1000 * m / calls for n, m in wall.items()},
                "median_cpu_ms_per_call": {n: 1000 * m / calls for n, m in own.items()},
                "doclane_vs_sdk": wall["doclane"] / wall["sdk"],
                "doclane_vs_bare": wall["doclane"] / wall["bare"],
                "cpu_doclane_vs_sdk": own["doclane"] / own["sdk"],
                "cpu_doclane_vs_bare": own["doclane"] / own["bare"],
            }
    return report


def show(report: dict[str, Any]) -> None:
    print(f"{report['calls']} calls x {report['rounds']} rounds, alternating, medians")
    for revision, figures in report["revisions"].items():
        per_call, cpu = figures["median_ms_per_call"], figures["median_cpu_ms_per_call"]
        print(f"\n{revision} (negotiated: {figures['negotiated']})")
        for name in CONTESTANTS:
            runs = ", ".join(f"{s:.2f}" for s in figures["seconds"][name])
            print(
                f"  {name:8} {per_call[name]:.3f} ms/call wall, {cpu[name]:.3f} ms/call CPU"
                f"   runs (s): {runs}"
            )
        print(
            f"  wall: doclane/sdk {figures['doclane_vs_sdk']:.2f} (goal <= {GOAL_SDK}), "
            f"doclane/bare {figures['doclane_vs_bare']:.2f} (goal <= {GOAL_BARE})\n"
            f"  CPU:  doclane/sdk {figures['cpu_doclane_vs_sdk']:.2f}, "
            f"doclane/bare {figures['cpu_doclane_vs_bare']:.2f}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="20 calls, 1 round (CI)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--one", choices=CONTESTANTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--modern", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.one:
        one(args.one, args.url, args.calls, args.modern)
        return
    if args.smoke:
        args.calls, args.rounds = 20, 1
    os.environ.setdefault("DOCLANE_LOG_LEVEL", "WARNING")
    report = measure(args.calls, args.rounds)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        show(report)


if __name__ == "__main__":
    main()
