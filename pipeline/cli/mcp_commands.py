"""``doclane mcp``: the operator's first tools when the fleet cannot reach its Docling server.

``tools`` lists what the server offers, ``ping`` times a round trip, ``call`` calls one tool
(``--repeat N`` calls it N times over one session, one line each, to see a flaky server
flake). They go through the same client, retry and circuit breaker as the workers, so a sick
server trips the fleet's breaker here too and an open circuit answers E309 without a request.
With ``--json`` every command prints JSON (one object per line) and exits non-zero on error,
with the catalog error's ``to_dict()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from pydantic import ValidationError

from errors import PipelineError, Stage, classify
from pipeline.mcp.client import McpClient
from pipeline.mcp.endpoints import normalize_endpoint, stdio_endpoint
from pipeline.mcp.protocol import ToolResult
from pipeline.mcp.settings import check_no_auth_for_stdio
from pipeline.resilience.facade import Resilient, build_resilient

from .output import AS_JSON_LINES, echo_error, echo_json, fail, usage_error
from .settings import command_settings

T = TypeVar("T")

app = typer.Typer(
    help="Diagnose the Docling MCP server: list its tools, ping it, call a tool.",
    no_args_is_help=True,
    add_completion=False,
)

_ORIGIN = typer.Option(
    None,
    "--origin",
    help="Server origin or endpoint URL; /mcp is added when there is no path "
    "(default: the first of $DOCLING_MCP_ORIGIN).",
)
_COMMAND = typer.Option(
    None,
    "--command",
    help="Run the server as a child process and speak stdio to it, e.g. "
    "'docling-mcp-server --transport stdio' (default: $DOCLING_MCP_COMMAND).",
)


def call_once(
    client: McpClient,
    tool: str,
    arguments: dict[str, Any],
    *,
    size_bytes: int | None = None,
    timeout: float | None = None,
) -> ToolResult:
    """The one call path of ``doclane mcp call``; a tool's ``isError`` becomes E306/E307.

    Kept to a single function so the resilience layer (retry around breaker) can wrap it in
    one place, the same way the workers' calls are wrapped.
    """
    result = client.call_tool(tool, arguments, size_bytes=size_bytes, timeout=timeout)
    if result.is_error:
        raise classify(result.raw, stage=stage_of(tool))
    return result


def stage_of(tool: str) -> Stage:
    """Which step a tool is, for the E306 (convert) / E307 (export) distinction."""
    return "export" if "export" in tool else "convert"


@app.command()
def tools(
    origin: str | None = _ORIGIN, command: str | None = _COMMAND, as_json: bool = AS_JSON_LINES
) -> None:
    """List the server's tools (after a full handshake)."""
    with _resilient(origin, as_json, command) as resilient:
        listed, client = _run(resilient, lambda c: (c.tools(), c), as_json)
        server = client.server
    if as_json:
        echo_json(
            {
                "ok": True,
                "endpoint": client.endpoint,
                "server": _server_dict(client),
                "tools": [tool.to_dict() for tool in listed],
            }
        )
        return
    name = f"{server.name} {server.version}".strip() if server else "server"
    typer.echo(f"{name} at {client.endpoint}: {len(listed)} tools")
    width = max((len(tool.name) for tool in listed), default=0)
    for tool in listed:
        typer.echo(f"  {tool.name:<{width}}  {tool.summary}")


@app.command()
def ping(
    origin: str | None = _ORIGIN,
    command: str | None = _COMMAND,
    as_json: bool = AS_JSON_LINES,
    show_trail: bool = typer.Option(False, "--trail", help="Also show the lifecycle trail."),
) -> None:
    """Initialize a session and time an MCP ping."""
    started = time.monotonic()
    with _resilient(origin, as_json, command) as resilient:
        latency, client = _run(resilient, lambda c: (c.ping(), c), as_json)
        handshake_s = max(0.0, time.monotonic() - started - latency)
        trail = client.trail
        breakers = resilient.breakers()
    if as_json:
        report: dict[str, Any] = {
            "ok": True,
            "endpoint": client.endpoint,
            "latency_s": round(latency, 6),
            "initialize_s": round(handshake_s, 6),
            "server": _server_dict(client),
            "breakers": breakers,
        }
        if show_trail:
            report["trail"] = [step.to_dict() for step in trail]
        echo_json(report)
        return
    typer.echo(
        f"pong from {client.endpoint} in {latency * 1000:.1f} ms "
        f"(handshake {handshake_s * 1000:.1f} ms, protocol {client.negotiated_version})"
    )
    if show_trail:
        for step in trail:
            typer.echo(f"  {step}")


@app.command()
def call(
    *,
    tool: str = typer.Argument(..., help="Tool name, as `doclane mcp tools` lists it."),
    args: str = typer.Option("{}", "--args", help="The tool's arguments as a JSON object."),
    size_bytes: int | None = typer.Option(
        None, "--size-bytes", min=0, help="Document size: picks the timeout tier."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", min=0.001, help="Seconds; overrides the size tier."
    ),
    repeat: int = typer.Option(
        1, "--repeat", min=1, help="Call N times over one session, one line each."
    ),
    origin: str | None = _ORIGIN,
    command: str | None = _COMMAND,
    as_json: bool = AS_JSON_LINES,
) -> None:
    """Call one tool; an isError result is reported as an error (E306, or E307 for exports)."""
    arguments = _parse_arguments(args)
    failures = 0
    with _resilient(origin, as_json, command) as resilient:
        for number in range(1, repeat + 1):
            started = time.monotonic()
            result: ToolResult | None = None
            error: PipelineError | None = None
            try:
                result = resilient.run(
                    lambda c: call_once(c, tool, arguments, size_bytes=size_bytes, timeout=timeout),
                    label=f"mcp call {tool}",
                )
            except PipelineError as exc:
                failures += 1
                error = exc
            latency = time.monotonic() - started
            _report_call(number, repeat, latency, result=result, error=error, as_json=as_json)
    if failures:
        raise typer.Exit(1)


# --- helpers -------------------------------------------------------------------------------------


@contextmanager
def _resilient(
    origin: str | None, as_json: bool, command: str | None = None
) -> Iterator[Resilient]:
    """The workers' call path (pool, breaker, retry) for ``--origin``, ``--command`` or the
    settings' origins (or command).

    Sessions are opened lazily inside the breaker and closed (DELETE, or the child stopped)
    afterwards.
    """
    if origin and command:
        usage_error("give --origin (a server) or --command (a stdio child), not both", as_json)
    try:
        settings = command_settings().mcp
        if command:
            check_no_auth_for_stdio(settings.auth, "--command")
            endpoints = [stdio_endpoint(command)]
        else:
            endpoints = [normalize_endpoint(origin)] if origin else settings.endpoints
        resilience = command_settings().resilience
    except (ValidationError, ValueError) as exc:
        usage_error(f"configuration error: {exc}", as_json)
    resilient = build_resilient(settings, resilience, endpoints=endpoints)
    try:
        yield resilient
    finally:
        resilient.close()


def _run(resilient: Resilient, unit: Callable[[McpClient], T], as_json: bool) -> T:
    try:
        return resilient.run(unit, label="doclane mcp")
    except PipelineError as exc:
        fail(exc, as_json)


def _parse_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--args") from exc
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--args")
    return value


def _report_call(
    number: int,
    repeat: int,
    latency: float,
    *,
    result: ToolResult | None,
    error: PipelineError | None,
    as_json: bool,
) -> None:
    if as_json:
        line: dict[str, Any] = {"ok": error is None}
        if repeat > 1:
            line["n"] = number
        line["latency_s"] = round(latency, 6)
        if result is not None:
            line["result"] = result.to_dict()
        if error is not None:
            line["error"] = error.to_dict()
        echo_json(line)
        return
    prefix = f"[{number}/{repeat}] " if repeat > 1 else ""
    if error is not None:
        echo_error(error, prefix=prefix)
        return
    assert result is not None
    body = (
        json.dumps(result.structured, indent=2, ensure_ascii=False)
        if result.structured is not None
        else result.text
    )
    typer.echo(f"{prefix}{result.tool} answered in {latency * 1000:.1f} ms")
    if repeat == 1:
        typer.echo(body)


def _server_dict(client: McpClient) -> dict[str, Any]:
    server = client.server
    return {
        "name": server.name if server else None,
        "version": server.version if server else None,
        "protocol_version": client.negotiated_version,
        "session_id": client.session_id,
    }
