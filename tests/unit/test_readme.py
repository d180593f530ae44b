"""What the README tells a user to type exists: its commands, their options, the files it names.

Every shell block is marked: run here by tests/e2e/test_readme_tour.py, or checked only (it
needs Docker, a bucket, ...; tests/support/readme.py says how). Every block, run or not, is read
here: each ``doclane`` command and option it names is asked of the CLI itself (the click tree
typer builds, so a renamed option fails here), each file it names must be in the repository,
each compose service and profile in compose.yaml, each tool's path one scripts/lib.sh installs.
The ``doclane ...`` spans of the README's prose are held to the same, and its links and the
docs' resolve (files and their headings) without leaving the repository.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.main import get_command

from pipeline.cli import app
from tests.support.readme import (
    README,
    ROOT,
    SERVERS,
    ShellBlock,
    SimpleCommand,
    shell_blocks,
    shell_split,
    simple_commands,
)

#: Made by scripts/demo and the tour itself, not kept in the repository (both git-ignored).
MADE_BY_THE_SCRIPTS = (".venv/", ".doclane/")
#: Where scripts/lib.sh installs the servers (DOCLANE_TOOLS_DIR's default).
TOOLS_PREFIXES = ("~/.cache/doclane/", "$HOME/.cache/doclane/")
_FILE_SUFFIX = re.compile(
    r"\.(md|docx|pptx|xlsx|pdf|html|csv|ya?ml|toml|json|py|sh|example|txt|png)$"
)
#: Docs whose links and citations must stay inside the repository.
PAGES = (
    README,
    *(ROOT / "docs" / name for name in ("operations.md", "client.md", "architecture.md")),
)


def every_command() -> Iterator[tuple[ShellBlock, SimpleCommand]]:
    for block in shell_blocks():
        for command in simple_commands(block.text):
            yield block, command


# ---- the CLI ---------------------------------------------------------------------------------


def cli_problems(words: Sequence[str]) -> list[str]:
    """What is wrong with ``doclane WORDS``: a command it does not have, an option its command
    does not take. Asked of the command tree typer builds from the code."""
    command: Any = get_command(app)
    path = ["doclane"]
    rest = list(words[1:])
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        found = command.commands.get(name)
        if found is None:
            return [f"`{' '.join(path)}` has no command {name!r}"]
        path.append(name)
        command = found
    options = {"--help"}
    for param in command.params:
        if param.param_type_name == "option":
            options.update(param.opts, param.secondary_opts)
    return [
        f"`{' '.join(path)}` has no option {word.split('=', 1)[0]}"
        for word in rest
        if word.startswith("-") and word != "-" and word.split("=", 1)[0] not in options
    ]


def test_every_shell_block_says_whether_it_runs_here() -> None:
    blocks = shell_blocks()
    assert blocks
    unmarked = [str(b) for b in blocks if b.marker is None]
    how = "<!-- tour: SERVER... --> or <!-- checked: WHY -->"
    assert not unmarked, f"mark each with {how}: {unmarked}"
    assert {server for b in blocks for server in b.servers} == set(SERVERS)
    for server in SERVERS:  # the tour starts each server in a block of its own
        assert any(b.servers == (server,) for b in blocks), server


def test_every_doclane_command_and_option_the_readme_names_exists() -> None:
    problems = []
    for block, command in every_command():
        if command.words[0] == "doclane":
            problems += [f"{block}: {p}" for p in cli_problems(command.words)]
    for span in prose_spans():  # the prose's
        if span.startswith("doclane "):
            problems += [f"README.md `{span}`: {p}" for p in cli_problems(shell_split(span))]
    assert not problems, "\n".join(problems)


def test_the_check_fails_on_a_command_or_option_the_cli_does_not_have() -> None:
    assert cli_problems(["doclane", "submit", "x", "--wait", "--to=md"]) == []
    assert cli_problems(["doclane", "tenants", "set", "a", "--weight", "2"]) == []
    assert cli_problems(["doclane", "submit", "--no-such"]) == [
        "`doclane submit` has no option --no-such"
    ]
    assert cli_problems(["doclane", "mcp", "frobnicate"]) == [
        "`doclane mcp` has no command 'frobnicate'"
    ]


# ---- files -------------------------------------------------------------------------------------


def named_paths(command: SimpleCommand) -> Iterator[str]:
    """The words of a command that name a file or folder of the repository (relative to it, as
    the README's commands run from the repository; ``$PWD/`` is the repository too)."""
    words = command.words[1:]
    if command.words[0] == "mkdir":
        return  # it makes them
    if command.words[0] == "cp":
        words = words[:-1]  # the copy is made
    for word in words:
        value = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*=", "", word).removeprefix("@")
        value = value.replace("$PWD/", "")
        if (
            not value
            or " " in value
            or "://" in value
            or "$" in value
            or value.startswith(("-", "~", "/", *MADE_BY_THE_SCRIPTS))
            or re.match(r"^[\w.-]+:\d+", value)  # host:port/path
        ):
            continue
        if "/" in value or _FILE_SUFFIX.search(value):
            yield value


def missing_paths(command: SimpleCommand) -> list[str]:
    return [path for path in named_paths(command) if not any(ROOT.glob(path.rstrip("/")))]


def prose_spans() -> Iterator[str]:
    """The README's inline code spans, outside its fenced blocks."""
    prose = re.sub(r"^```.*?^```$", "", README.read_text(), flags=re.M | re.S)
    yield from (span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose))


def test_every_file_the_readme_names_is_in_the_repository() -> None:
    problems = []
    for block, command in every_command():
        problems += [f"{block}: {command.words[0]} names {path}" for path in missing_paths(command)]
    for span in prose_spans():  # `scripts/demo`, `kubectl apply -k deploy/...`: every word
        for command in simple_commands(span):
            named = SimpleCommand(("", *command.words), ())
            problems += [f"README.md `{span}` names {path}" for path in missing_paths(named)]
    assert not problems, "\n".join(problems)


def test_the_check_fails_on_a_file_that_is_not_there() -> None:
    command = SimpleCommand(("curl", "-F", "file=@report.docx", "-F", "to=md", "localhost:1/x"), ())
    assert missing_paths(command) == ["report.docx"]
    assert missing_paths(SimpleCommand(("doclane", "submit", "examples/*.nope"), ())) == [
        "examples/*.nope"
    ]
    named = SimpleCommand(("doclane", "submit", "$PWD/examples/", "README.md"), ())
    assert missing_paths(named) == []


def test_every_tool_path_is_where_scripts_lib_installs_it() -> None:
    lib = (ROOT / "scripts" / "lib.sh").read_text()
    found = 0
    for block, command in every_command():
        for word in (*command.words, *" ".join(command.words).split()):
            prefix = next((p for p in TOOLS_PREFIXES if word.startswith(p)), None)
            if prefix is None:
                continue
            venv, bin_dir, name = word.removeprefix(prefix).split("/")
            assert f'"$DOCLANE_TOOLS_DIR/{venv}"' in lib, (str(block), word)
            assert bin_dir == "bin" and re.search(rf"/bin/{re.escape(name)}\}}?\"", lib), (
                str(block),
                word,
            )
            found += 1
    assert found >= 2


def test_the_compose_lines_name_its_services_and_profiles() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    profiles = {p for service in services.values() for p in service.get("profiles", [])}
    problems = []
    for block, command in every_command():
        words = command.words
        if words[:2] != ("docker", "compose"):
            continue
        for flag, value in itertools.pairwise(words):
            if flag == "--profile" and value not in profiles:
                problems.append(f"{block}: no profile {value!r} in compose.yaml")
            if flag == "--scale" and value.split("=")[0] not in services:
                problems.append(f"{block}: no service {value.split('=')[0]!r} in compose.yaml")
    assert not problems, "\n".join(problems)


# ---- links ------------------------------------------------------------------------------------


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_citations_stay_in_the_repository(page: Path) -> None:
    text = page.read_text()
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            problems.append(f"links to {target}: no such file")
        elif anchor and anchor not in heading_anchors(linked):
            problems.append(f"links to {target}: no such heading")
    for cited in re.findall(r"(/work/\S+|\bDESIGN\.md\b|\bshared/[\w.-]+\.md)", text):
        problems.append(f"cites {cited}, which is not in the repository")
    assert not problems, "\n".join(problems)
