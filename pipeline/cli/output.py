"""How every doclane command speaks to scripts: ``--json`` for one JSON object, else text.

Scripts read the exit status (1: the operation failed, 2: the command was used wrongly) and,
with ``--json``, ``{"ok": false, "error": {...}}`` on stdout, the catalog error's ``to_dict()``.
The catalog is only named for the type checker: the root imports this module for ``version``'s
``--json``, and loading the error catalog would cost every command that never fails.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from errors import PipelineError
    from pipeline.jobs import TenantFigures

#: ``--json`` of every command that prints one answer.
AS_JSON = typer.Option(False, "--json", help="Print one JSON object.")
#: ``--json`` of the commands that print one answer per call (``doclane mcp call --repeat``).
AS_JSON_LINES = typer.Option(False, "--json", help="Print JSON (one object per line).")


def echo_json(value: Any) -> None:
    """One JSON object on a line of stdout."""
    typer.echo(json.dumps(value))


def echo_error(exc: PipelineError, *, prefix: str = "") -> None:
    """A catalog error for people, on stderr: its code, title and message, then what to do
    about it (under the message when ``prefix`` numbers the line)."""
    typer.echo(f"{prefix}{exc.code} {exc.entry.title}: {exc.message}", err=True)
    typer.echo(f"{' ' * len(prefix)}{exc.action}", err=True)


def fail(exc: PipelineError, as_json: bool) -> NoReturn:
    """A catalog error: its code, title, message, and what to do about it."""
    if as_json:
        echo_json({"ok": False, "error": exc.to_dict()})
    else:
        echo_error(exc)
    raise typer.Exit(1)


def usage_error(message: str, as_json: bool, *, code: int = 2) -> NoReturn:
    """Not a catalog error: a bad argument, a missing job, a job in the wrong state."""
    if as_json:
        echo_json({"ok": False, "error": {"code": None, "message": message}})
    else:
        typer.echo(message, err=True)
    raise typer.Exit(code)


def render_tenants(figures: list[TenantFigures]) -> str:
    """The table of ``doclane tenants list`` and of ``doclane stats``' tenants."""
    head = (
        f"{'tenant':<20} {'weight':>6} {'max run':>8} {'max queue':>9} {'queued':>8} "
        f"{'running':>7} {'ok 1h':>7} {'failed 1h':>9} {'per min':>8}"
    )
    lines = [head]
    for f in figures:
        t = f.tenant
        running, queued = shown_limit(t.max_running), shown_limit(t.max_queued)
        lines.append(
            f"{t.name:<20} {t.weight:>6} {running:>8} {queued:>9} "
            f"{f.queued:>8} {f.running:>7} {f.succeeded:>7} {f.failed:>9} {f.per_minute:>8.1f}"
            + ("  paused" if t.paused else "")
        )
    return "\n".join(lines) + "\n"


def shown_limit(limit: int | None) -> str:
    """A tenant's limit as the tables show it: ``-`` for none."""
    return "-" if limit is None else str(limit)
