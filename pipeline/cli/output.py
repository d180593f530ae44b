"""How every doclane command speaks to scripts: ``--json`` for one JSON object, else text.

Every failure is a catalog error, printed here and nowhere else: scripts read the exit status
(1: the operation failed, 2: the command was used wrongly, E117) and, with ``--json``,
``{"ok": false, "error": {...}}`` on stdout, the catalog error's ``to_dict()`` (its ``code``,
``message``, ``retryable`` and ``action``); people read the same on stderr.
The catalog is only named for the type checker: the root imports this module for ``version``'s
``--json``, and loading the error catalog would cost every command that never fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from errors import PipelineError
    from pipeline.jobs.tenants import TenantFigures

#: ``--json`` of every command that prints one answer.
AS_JSON = typer.Option(False, "--json", help="Print one JSON object.")
#: ``--json`` of the commands that print one answer per call (``doclane mcp call --repeat``).
AS_JSON_LINES = typer.Option(False, "--json", help="Print JSON (one object per line).")


def echo_json(value: Any) -> None:
    """One JSON object on a line of stdout."""
    typer.echo(json.dumps(value))


def echo_error(exc: PipelineError, *, prefix: str = "") -> None:
    """A catalog error for people, on stderr: its code, title and message, then whether it is
    worth trying again and what to do about it (under the message when ``prefix`` numbers the
    line)."""
    again = "retryable" if exc.retryable else "not retryable"
    typer.echo(f"{prefix}{exc.code} {exc.entry.title}: {exc.message}", err=True)
    typer.echo(f"{' ' * len(prefix)}{again}: {exc.action}", err=True)


def fail(
    exc: PipelineError,
    as_json: bool,
    *,
    exit_code: int = 1,
    context: Mapping[str, Any] | None = None,
) -> NoReturn:
    """End the command with a catalog error: its code, title, message, whether it is
    retryable, and what to do about it; with ``--json``, ``{"ok": false, "error": ...}`` and
    the ``context`` (what the command was at, e.g. its database)."""
    if as_json:
        echo_json({"ok": False, **(context or {}), "error": exc.to_dict()})
    else:
        echo_error(exc)
    raise typer.Exit(exit_code)


def usage_error(message: str, as_json: bool) -> NoReturn:
    """The command was used wrongly (a bad argument or option): E117, exit 2."""
    from errors import InvalidArgument

    fail(InvalidArgument(message), as_json, exit_code=2)


def state_error(message: str, as_json: bool) -> NoReturn:
    """The job's state does not allow what was asked (cancel a finished job, read the results
    of one that has not succeeded): E118, exit 1."""
    from errors import JobStateForbids

    fail(JobStateForbids(message), as_json)


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
