"""The ``doclane`` command line: the composition root that wires settings, client and store.

Each command group lives in its own module and is registered here; every command takes
``--json`` so scripts never have to parse prose.
"""

from __future__ import annotations

import importlib
import logging

import typer

app = typer.Typer(
    name="doclane",
    help="Convert documents through a Docling MCP server, with a fleet of workers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: (module, group name or None for top-level commands). A group's module defines ``app``;
#: with None, its commands join the root (``doclane submit``, not ``doclane jobs submit``).
_GROUPS: tuple[tuple[str, str | None], ...] = (
    ("pipeline.cli.mcp_commands", "mcp"),
    ("pipeline.cli.db_commands", "db"),
    ("pipeline.cli.jobs_commands", None),
    ("pipeline.cli.admin_commands", None),
    ("pipeline.cli.worker_commands", None),
)


def _register() -> None:
    for module_name, group in _GROUPS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        if group is None:
            app.add_typer(module.app)
        else:
            app.add_typer(module.app, name=group)


@app.callback()
def _root() -> None:
    """Convert documents through a Docling MCP server, with a fleet of workers."""
    # The pool logs every failed connect; a command reports an unreachable database in one
    # line of its own (E401), so without logging configured these stay quiet.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


@app.command()
def version(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Print doclane's version."""
    import json

    from pipeline import __version__

    typer.echo(json.dumps({"version": __version__}) if as_json else __version__)


_register()


def main() -> None:
    app()
