"""How every doclane command reports a failure: one JSON object with ``--json``, else text.

Scripts read the exit status (1: the operation failed, 2: the command was used wrongly) and,
with ``--json``, ``{"ok": false, "error": {...}}`` on stdout, the catalog error's ``to_dict()``.
"""

from __future__ import annotations

import json
from typing import NoReturn

import typer

from errors import PipelineError


def fail(exc: PipelineError, as_json: bool) -> NoReturn:
    """A catalog error: its code, title, message, and what to do about it."""
    if as_json:
        typer.echo(json.dumps({"ok": False, "error": exc.to_dict()}))
    else:
        typer.echo(f"{exc.code} {exc.entry.title}: {exc.message}", err=True)
        typer.echo(exc.action, err=True)
    raise typer.Exit(1)


def usage_error(message: str, as_json: bool, *, code: int = 2) -> NoReturn:
    """Not a catalog error: a bad argument, a missing job, a job in the wrong state."""
    if as_json:
        typer.echo(json.dumps({"ok": False, "error": {"code": None, "message": message}}))
    else:
        typer.echo(message, err=True)
    raise typer.Exit(code)
