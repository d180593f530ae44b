"""The README's five-minute tour, run as written: its blocks pasted one after another into one
shell, once with each server.

The shell starts in a copy of the checkout (the samples and the README copied, the rest linked,
no ``.env``), as a fresh shell after ``scripts/demo`` would: the project's ``.venv`` and the
servers scripts/test installed. The only changes to the README's text are the two ports (3001,
8080: free ones here) and the tools' folder when it is not ``~/.cache/doclane``. The settings
the tour does not set itself (the database, the broker, the breakers' namespace) are the test's
own, so nothing it starts meets another test. Every command must succeed (the shell runs with
``set -e``); between blocks the test reads what the user would see, and the database.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.fixtures.brokers import Broker
from tests.fixtures.database import ScratchDatabases, database_url
from tests.fixtures.docling_server import free_port
from tests.fixtures.waiting import wait_for
from tests.support.readme import ROOT, SERVERS, ShellBlock, shell_blocks
from tests.support.tools import DOCLING_MCP_BIN, DOCLING_RS_MCP_BIN
from tests.support.user_environment import user_environment

pytestmark = [pytest.mark.docling, pytest.mark.timeout(900)]

#: The README's ports and tools, and what they are here.
README_PORTS = {"3001": "server", "8080": "api"}
README_TOOLS = {
    "~/.cache/doclane/docling-rs-mcp-venv/bin/docling-rs-mcp": DOCLING_RS_MCP_BIN,
    "$HOME/.cache/doclane/docling-rs-mcp-venv/bin/docling-rs-mcp": DOCLING_RS_MCP_BIN,
    "~/.cache/doclane/docling-mcp-venv/bin/docling-mcp-server": DOCLING_MCP_BIN,
}
#: How long one block may take at most (a deadline, not a wait).
BLOCK_DEADLINE_S = 420.0


class Terminal:
    """One bash session fed blocks as a user pastes them; its output is read line by line."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its background jobs are in its process group
        )
        self.transcript: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.run("set -e -o pipefail")  # a failing command ends the session: the test fails

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def run(self, text: str, what: str = "the shell") -> str:
        """Paste ``text``; what it printed, once its last command has returned."""
        done = f"@@done {uuid.uuid4().hex}"
        assert self.process.stdin is not None
        self.process.stdin.write(f"{text}\nprintf '\\n%s\\n' '{done}'\n")
        self.process.stdin.flush()
        out: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=BLOCK_DEADLINE_S)
            except queue.Empty:
                pytest.fail(f"{what} did not end within {BLOCK_DEADLINE_S} s:\n{self.tail()}")
            if line is None:
                pytest.fail(f"{what}: a command failed (the shell ended):\n{self.tail()}")
            if line.rstrip("\n") == done:
                return "".join(out)
            out.append(line)
            self.transcript.append(line)

    def tail(self, lines: int = 80) -> str:
        return "".join(self.transcript[-lines:])

    def close(self) -> None:
        """Leave the shell; stop whatever it left running (its process group)."""
        if self.process.poll() is None and self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            if sig is signal.SIGTERM:
                wait_for(lambda: not _group_alive(self.process.pid), timeout=30, message="tour")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def checkout_copy(folder: Path) -> Path:
    """The repository as a fresh clone after scripts/demo looks: samples and README copied
    (what the tour converts and uploads), the rest linked; no .env, no .doclane."""
    copy = folder / "doclane"
    copy.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (".env", ".doclane", ".git"):
            continue
        if entry.name in ("examples", "README.md"):
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, copy / entry.name)
        else:
            (copy / entry.name).symlink_to(entry)
    return copy


def as_run_here(block: ShellBlock, ports: dict[str, int]) -> str:
    text = block.text
    for written, here in README_TOOLS.items():
        text = text.replace(written, here)
    for written, role in README_PORTS.items():
        text = re.sub(rf"\b{written}\b", str(ports[role]), text)
    return text


def tour(server: str) -> Iterator[ShellBlock]:
    yield from (block for block in shell_blocks() if block.runs_with(server))


@pytest.mark.parametrize("server", SERVERS)
def test_the_tour_runs_as_written(
    server: str, test_databases: ScratchDatabases, redis_broker: Broker, tmp_path: Path
) -> None:
    assert (ROOT / ".venv" / "bin" / "activate").exists(), "the tour runs after scripts/demo"
    database = database_url(test_databases.create())  # empty: the tour migrates it
    env = user_environment(database, redis_broker.url)  # the tour sets the rest itself
    ports = {"server": free_port(), "api": free_port()}
    checkout = checkout_copy(tmp_path)
    terminal = Terminal(checkout, env)
    try:
        seen = {}
        for block in tour(server):
            seen[block.line] = out = terminal.run(as_run_here(block, ports), str(block))
            if "-F file=@" in block.text:
                check_the_main_block(terminal, out, database)
        assert len(seen) >= 4, seen.keys()
    finally:
        terminal.close()
    with psycopg.connect(database) as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
    assert set(states) == {"succeeded"}, states  # no job of the tour failed or was left waiting


def check_the_main_block(terminal: Terminal, out: str, database: str) -> None:
    """What the user sees after the block that submits, reads and uploads: every document
    succeeded, the newest one's markdown (as the CLI and the API print it), and the upload,
    which lands in the inbox, converted (the server's roots hold the inbox)."""
    for name in ("quarterly-report.docx", "launch-plan.pptx", "handbook.html"):
        assert re.search(rf"^\S+ succeeded\b.*examples/{re.escape(name)}$", out, re.M), out
    job = terminal.run("printf '%s\\n' \"$job\"").strip()
    with psycopg.connect(database) as conn:
        row = conn.execute(
            "SELECT content FROM results WHERE job_id = %s AND format = 'md'", (job,)
        ).fetchone()
    assert row is not None, (job, out)
    assert out.count(str(row[0]).strip()) >= 2, out  # `doclane result` and the API's result

    answer = json.loads(out.rstrip().rsplit("\n", 1)[-1])  # the upload's, curl's last line
    upload = answer["accepted"][0]["job_id"]

    def ended() -> str | None:
        with psycopg.connect(database) as conn:
            found = conn.execute(
                "SELECT state, error_code, error_message FROM jobs WHERE id = %s", (upload,)
            ).fetchone()
        return found if found and found[0] in ("succeeded", "failed", "cancelled") else None

    state = wait_for(ended, timeout=120, message="the upload converted")
    assert state[0] == "succeeded", (state, terminal.tail())
