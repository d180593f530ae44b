"""The CLI imports a command's module only when that command runs, and says the same as when
it imported them all: every command listed, every help text unchanged. Leaving, it does not
take apart what it imported (frozen for the process's end), and still does all else."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

import pipeline.cli
from pipeline.cli import _BUILD, MODULES, CommandModule, app, module_commands


def _eager_app() -> typer.Typer:
    """The root as it was built before: every module's commands added at import."""
    eager = typer.Typer(name="doclane", help=app.info.help, no_args_is_help=True, **_BUILD)
    eager.registered_callback = app.registered_callback
    eager.registered_commands = list(app.registered_commands)
    for commands in MODULES:
        if commands.group is None:
            eager.add_typer(commands.load().app)
        else:
            eager.add_typer(commands.load().app, name=commands.group)
    return eager


def _help(root: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(
        root, [*args, "--help"], prog_name="doclane", env={"COLUMNS": "100"}
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("commands", MODULES, ids=lambda commands: commands.names[0])
def test_the_table_names_exactly_the_commands_each_module_defines(
    commands: CommandModule,
) -> None:
    assert tuple(module_commands(commands)) == commands.names


def test_each_module_is_loaded_once_and_a_command_no_module_defines_is_refused() -> None:
    loaded = [commands.load() for commands in MODULES]
    assert len({module.__name__ for module in loaded}) == len(MODULES)
    with pytest.raises(LookupError, match="no module defines the command 'nope'"):
        CommandModule(None, ("nope",)).load()


def test_every_help_text_is_the_one_the_eager_cli_printed() -> None:
    eager = _eager_app()
    assert _help(app) == _help(eager)
    for commands in MODULES:
        for name in commands.names:
            assert _help(app, name) == _help(eager, name), name
        if (group := commands.group) is not None:
            built = module_commands(commands)[group]
            assert isinstance(built, TyperGroup)
            for sub in built.commands:
                assert _help(app, group, sub) == _help(eager, group, sub), f"{group} {sub}"


def test_a_mistyped_command_is_still_matched_against_every_name() -> None:
    result = CliRunner().invoke(app, ["sumbit"], prog_name="doclane")
    assert result.exit_code == 2
    assert "Did you mean 'submit'?" in result.output


@pytest.mark.parametrize(
    ("args", "own"),
    [
        (["submit", "--help"], "pipeline.cli.jobs_commands"),
        (["version"], None),
        (["db", "--help"], "pipeline.cli.db_commands"),
    ],
)
def test_a_command_imports_its_own_module_and_no_other(args: list[str], own: str | None) -> None:
    probe = (
        "import json, sys\n"
        "from pipeline.cli import app\n"
        "try:\n"
        f"    app({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    command_modules = {commands.load().__name__ for commands in MODULES}
    assert command_modules & loaded == ({own} if own else set())
    if args[0] == "submit":  # what only other commands need: the MCP client, Celery (the
        # settings tree's sections of pipeline.mcp and pipeline.admin are read by every command)
        assert not {"pipeline.mcp.client", "pipeline.admin.stats", "celery"} & loaded
    assert pipeline.cli.__name__ in loaded


def test_leaving_freezes_the_objects_and_still_runs_every_exit_step() -> None:
    probe = (
        "import atexit, gc, sys\n"
        "from pipeline.cli import main\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "sys.argv = ['doclane', 'version', '--json']\n"
        "sys.stdout.write('unflushed ')\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("unflushed {") and json.loads(done.stdout.split(" ", 1)[1])
    assert done.stderr.strip().splitlines()[-1] == "frozen True"


def test_a_command_runs_with_the_collector_on_and_the_imports_frozen() -> None:
    """main() keeps the cyclic collector off while the command's modules are imported (it went
    through their objects hundreds of times: a tenth of a submit), then freezes them and turns
    it back on before the command runs."""
    probe = (
        "import gc, json, sys\n"
        "import pipeline.cli as cli\n"
        "@cli.app.command('gc-state')\n"
        "def gc_state() -> None:\n"
        "    print(json.dumps({'on': gc.isenabled(), 'frozen': gc.get_freeze_count()}))\n"
        "sys.argv = ['doclane', 'gc-state']\n"
        "cli.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    state = json.loads(done.stdout)
    assert state["on"] is True
    assert state["frozen"] > 10_000  # typer, click and pipeline.cli's objects at least
