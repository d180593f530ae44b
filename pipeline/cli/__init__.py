"""The ``doclane`` command line: the composition root that wires settings, client and store.

Each command group lives in its own module, listed in ``MODULES`` and imported only when one
of its commands runs (``doclane --help`` imports them all, to list them): importing every
module made every command pay for all of them, half a second of ``doclane submit``'s start
spent on, e.g., the MCP client of ``doclane mcp``. Every command takes ``--json`` so scripts
never have to parse prose.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Iterator, MutableMapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import typer
from typer._click import Command, Context  # typer's own click, which its groups hold
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup
from typer.exceptions import Abort

from .output import AS_JSON, echo_json, fail

if TYPE_CHECKING:  # the catalog is loaded when a command fails
    from errors import PipelineError


class CommandModule(NamedTuple):
    """One module of commands. It defines ``app``, as the group ``group`` (``doclane mcp
    tools``) or, with None, commands of the root (``doclane submit``, not ``doclane jobs
    submit``)."""

    group: str | None
    names: tuple[str, ...]

    def load(self) -> ModuleType:
        """The module, imported by a plain import statement (which import tools and the type
        checker read as any other), run at the first look-up of one of its commands."""
        match self.names[0]:
            case "mcp":
                from pipeline.cli import mcp_commands

                return mcp_commands
            case "db":
                from pipeline.cli import db_commands

                return db_commands
            case "submit":
                from pipeline.cli import jobs_commands

                return jobs_commands
            case "stats":
                from pipeline.cli import admin_commands

                return admin_commands
            case "worker":
                from pipeline.cli import worker_commands

                return worker_commands
            case "webhooks":
                from pipeline.cli import webhook_commands

                return webhook_commands
            case "tenants":
                from pipeline.cli import tenant_commands

                return tenant_commands
            case "audit":
                from pipeline.cli import access_commands

                return access_commands
            case _:
                raise LookupError(f"no module defines the command {self.names[0]!r}")


#: The command modules, in ``doclane --help``'s order.
MODULES: tuple[CommandModule, ...] = (
    CommandModule("mcp", ("mcp",)),
    CommandModule("db", ("db",)),
    CommandModule(None, ("submit", "status", "result", "cancel", "retry")),
    CommandModule(None, ("stats", "jobs", "api")),
    CommandModule(None, ("worker", "beat", "reconcile")),
    CommandModule(None, ("webhooks",)),
    CommandModule("tenants", ("tenants",)),
    CommandModule(None, ("audit", "tokens")),
)

#: Settings the root and every module's commands are built with alike.
_BUILD: dict[str, Any] = {"add_completion": False, "pretty_exceptions_enable": False}


def module_commands(commands: CommandModule) -> dict[str, Command]:
    """The commands of one module, built by typer as ``add_typer`` on the root builds them."""
    module = commands.load()
    holder = typer.Typer(**_BUILD)
    if commands.group is None:
        holder.add_typer(module.app)
    else:
        holder.add_typer(module.app, name=commands.group)
    built = typer.main.get_command(holder)
    assert isinstance(built, TyperGroup)
    return dict(built.commands)


class _LazyCommands(MutableMapping[str, Command]):
    """The root's commands by name: a module is imported at the first look-up of one of its
    commands. Listing names imports nothing (typer suggests close names from them)."""

    def __init__(self, loaded: MutableMapping[str, Command]) -> None:
        self._loaded = dict(loaded)
        self._where = {name: commands for commands in MODULES for name in commands.names}

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in self._where:
            self._loaded.update(module_commands(self._where[name]))
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if self._where.pop(name, None) is None and name not in self._loaded:
            raise KeyError(name)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from (name for name in self._where if name not in self._loaded)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._where.keys())


class _LazyRoot(TyperGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands)

    def list_commands(self, ctx: Context) -> list[str]:
        """Every command's name, without importing a module."""
        return list(self.commands)


app = typer.Typer(
    name="doclane",
    help="Convert documents through a Docling MCP server, with a fleet of workers.",
    no_args_is_help=True,
    cls=_LazyRoot,
    **_BUILD,
)


@app.callback()
def _root() -> None:
    """Convert documents through a Docling MCP server, with a fleet of workers."""
    # The command's module is imported by now (click resolves the command before it calls
    # this): what the imports made lives as long as the process, so the cyclic collector
    # leaves it alone from here on, and collects the command's own garbage as usual.
    gc.freeze()
    gc.enable()
    # The pool logs every failed connect; a command reports an unreachable database in one
    # line of its own (E401), so without logging configured these stay quiet.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


@app.command()
def version(as_json: bool = AS_JSON) -> None:
    """Print doclane's version."""
    from pipeline import __version__

    if as_json:
        echo_json({"version": __version__})
    else:
        typer.echo(__version__)


def main() -> None:
    # Imports make hundreds of thousands of objects that live as long as the process, and the
    # cyclic collector went through them again and again while they were being made: 255
    # passes, 0.11 s of a 0.85 s doclane submit. Off until the command's modules
    # are in (``_root``); a worker's pool processes, forked after that, share them untouched.
    gc.disable()
    try:
        sys.exit(_run(sys.argv[1:]))
    finally:
        # Leaving, the interpreter would take apart every object the imports made, cycle by
        # cycle: 0.2 s of every command's time on this kind of machine. Frozen, they go with
        # the process; atexit handlers (logging's flush among them) and the flush of stdout
        # and stderr still run, and every command closes its own connections before this.
        gc.freeze()


def _run(args: list[str]) -> int:
    """The command's exit status. Every failure leaves as a catalog error, printed by
    ``output``: click's own refusals of the command line (an unknown option, a missing
    argument) as E117, and a catalog error no command caught (a bug: each says its own) as
    itself, never as a traceback."""
    as_json = "--json" in args
    try:
        status = app(args=args, standalone_mode=False)
    except NoArgsIsHelpError as exc:  # ``doclane`` or a group alone: its help, as asked
        exc.show()
        return exc.exit_code
    except UsageError as exc:
        if not as_json and exc.ctx is not None:
            typer.echo(exc.ctx.get_usage(), err=True)
            typer.echo(f"Try '{exc.ctx.command_path} --help' for help.", err=True)
        return _failed(_invalid_argument(exc.format_message()), as_json, exit_code=exc.exit_code)
    except ClickException as exc:
        return _failed(_invalid_argument(exc.format_message()), as_json, exit_code=exc.exit_code)
    except Abort:
        typer.echo("Aborted!", err=True)
        return 1
    except Exception as exc:
        from errors import PipelineError

        if not isinstance(exc, PipelineError):
            raise
        return _failed(exc, as_json, exit_code=1)
    return status if isinstance(status, int) else 0


def _invalid_argument(message: str) -> PipelineError:
    from errors import InvalidArgument

    return InvalidArgument(message)


def _failed(exc: PipelineError, as_json: bool, *, exit_code: int) -> int:
    try:
        fail(exc, as_json, exit_code=exit_code)
    except typer.Exit as printed:
        return printed.exit_code
