"""The README's shell blocks, as the tests that run and check them read them.

Every ```` ```sh ```` block of README.md follows a marker line that says what it is for:

- ``<!-- tour: docling-rs-mcp docling-mcp -->``: the tour, run here as written
  (tests/e2e/test_readme_tour.py), in one shell per server listed: with each of them, or with
  one only (a line that works the same with either server runs once, with the default);
- ``<!-- checked: WHY -->``: not run here (it needs Docker, a bucket, ...), only checked: every
  ``doclane`` command and option it names exists, and every file (tests/unit/test_readme.py).

A block without a marker is an error: nobody would know whether it is meant to work.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SERVERS = ("docling-rs-mcp", "docling-mcp")

_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)
_MARKER = re.compile(r"<!-- (tour: ([\w -]+?)|checked: [^>]+?) -->\s*\Z")
#: Redirections: the word after one is where output goes, not an argument.
_REDIRECTS = re.compile(r"^(>|>>|<|>&|&>)$")


@dataclass(frozen=True)
class ShellBlock:
    line: int
    #: ``tour: <servers>`` or ``checked: <why>``; None when the block has no marker.
    marker: str | None
    #: The servers whose tour runs the block (none: a block that is checked only).
    servers: tuple[str, ...]
    text: str

    @property
    def runs(self) -> bool:
        return bool(self.servers)

    def runs_with(self, server: str) -> bool:
        return server in self.servers

    def __str__(self) -> str:
        return f"README.md:{self.line}"


def shell_blocks(text: str | None = None) -> list[ShellBlock]:
    """Every ```` ```sh ```` block of the README, in order, with its marker."""
    source = README.read_text() if text is None else text
    blocks = []
    for match in _BLOCK.finditer(source):
        before = source[: match.start()].rstrip("\n")
        marker = _MARKER.search(before.rsplit("\n", 1)[-1] + "\n")
        blocks.append(
            ShellBlock(
                line=source.count("\n", 0, match.start()) + 1,
                marker=marker.group(1) if marker else None,
                servers=tuple((marker.group(2) or "").split()) if marker else (),
                text=match.group(1),
            )
        )
    return blocks


def logical_lines(text: str) -> Iterator[str]:
    """The block's lines with continuations (a final backslash) joined."""
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


@dataclass(frozen=True)
class SimpleCommand:
    """One command of a line: its words after any ``NAME=value`` prefixes, without redirections
    (``targets`` holds where those write)."""

    words: tuple[str, ...]
    targets: tuple[str, ...]


def simple_commands(text: str) -> Iterator[SimpleCommand]:
    """Every simple command of a shell text: split at pipes, lists, subshells and ``$(``,
    comments dropped, quotes removed as the shell removes them."""
    for written in logical_lines(text):
        # A file descriptor's number is the redirection's (2>&1), not an argument (8080 >).
        line = re.sub(r"(?<=\s)\d+(?=>)", "", written.replace("$(", "; "))
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        words: list[str] = []
        targets: list[str] = []
        at = 0
        while at <= len(tokens):
            token = tokens[at] if at < len(tokens) else ";"
            following = tokens[at + 1] if at + 1 < len(tokens) else ""
            if _REDIRECTS.match(token):
                targets.append(following)
                at += 2
            elif set(token) <= set("|&;()"):
                yield from _command(words, targets)
                words, targets = [], []
                at += 1
            else:
                words.append(token)
                at += 1


def _command(words: list[str], targets: list[str]) -> Iterator[SimpleCommand]:
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before the command
    if words:
        yield SimpleCommand(tuple(words), tuple(targets))


def shell_split(line: str) -> list[str]:
    """One command line's words, as the shell would split them (for inline ``doclane ...``)."""
    return shlex.split(line, comments=True)
