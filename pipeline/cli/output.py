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
