"""``scripts/demo``, the README's first command, run as a user runs it: twice, with each server.

The first run converts every sample and shows one document's markdown; the second finds them
all converted already (deduplicated), which is a success too. The demo honours the usual
settings, so here it runs on a database, a Redis broker and an inbox of its own, with its logs
and its servers' folders in the test's folder and the tools scripts/test installed: nothing it
starts meets another test. What is asserted is what the user reads on the terminal, and that no
document was converted twice.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.fixtures.brokers import Broker
from tests.fixtures.database import ScratchDatabases, database_url
from tests.fixtures.docling_server import free_port
from tests.fixtures.examples import EXPECTED_MARKDOWN, PDF_PAGE_HEADINGS, PDF_SAMPLE
from tests.support.user_environment import user_environment

pytestmark = [pytest.mark.docling, pytest.mark.timeout(1000)]

ROOT = Path(__file__).resolve().parents[2]
#: What the demo submits to each server: docling-mcp converts no PDF offline.
SAMPLES = {
    "docling-rs-mcp": sorted([*EXPECTED_MARKDOWN, PDF_SAMPLE]),
    "docling-mcp": sorted(EXPECTED_MARKDOWN),
}


def run_demo(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """scripts/demo to its end. Past the deadline it is stopped as Ctrl-C would (its exit hooks
    stop the worker and the server), and the test fails with what it printed."""
    with subprocess.Popen(
        [str(ROOT / "scripts" / "demo")],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as demo:
        try:
            stdout, stderr = demo.communicate(timeout=420)
        except subprocess.TimeoutExpired:
            demo.send_signal(signal.SIGINT)
            stdout, stderr = demo.communicate(timeout=120)
            pytest.fail(f"scripts/demo did not end within 420 s:\n{stdout}\n{stderr}")
    return subprocess.CompletedProcess(demo.args, demo.returncode, stdout, stderr)


def outcome_lines(stdout: str) -> dict[str, str]:
    """The demo's table of outcomes: each sample's name -> its state."""
    found = re.findall(r"^  (\w+)\s+[0-9a-f-]{36}  (\S+)", stdout, re.M)
    return {name: state for state, name in found}


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("server", sorted(SAMPLES))
def test_the_demo_passes_twice_in_a_row(
    server: str, test_databases: ScratchDatabases, redis_broker: Broker, tmp_path: Path
) -> None:
    database = database_url(test_databases.create())  # empty: the demo migrates it itself
    env = user_environment(
        database,
        redis_broker.url,
        DOCLANE_INBOX_DIR=str(tmp_path / "inbox"),
        DOCLANE_SCRATCH_DIR=str(tmp_path / "scratch"),  # its logs and its servers' folders
        DOCLANE_DEMO_PORT=str(free_port()),
        DOCLANE_DEMO_SERVER=server,
    )
    samples = SAMPLES[server]

    first = run_demo(env, tmp_path)
    transcript = f"{first.stdout}\n{first.stderr}"
    assert first.returncode == 0, transcript
    assert outcome_lines(first.stdout) == dict.fromkeys(samples, "succeeded"), transcript
    assert "deduplicated" not in first.stdout, transcript
    for fragment in EXPECTED_MARKDOWN["quarterly-report.docx"]:  # the markdown it shows
        assert fragment in first.stdout, (fragment, transcript)
    if server == "docling-rs-mcp":  # two pages of the PDF, as markdown and chunks
        assert PDF_PAGE_HEADINGS[1] in first.stdout, transcript
        assert '"hierarchical"' in first.stdout, transcript
    assert "done: every sample succeeded" in first.stderr, transcript
    assert not listening(int(env["DOCLANE_DEMO_PORT"])), "the demo left its server running"

    second = run_demo(env, tmp_path)
    transcript = f"{second.stdout}\n{second.stderr}"
    assert second.returncode == 0, transcript
    assert outcome_lines(second.stdout) == dict.fromkeys(samples, "succeeded"), transcript
    assert f"({len(samples)} already converted by an earlier run: deduplicated)" in second.stdout
    for fragment in EXPECTED_MARKDOWN["quarterly-report.docx"]:
        assert fragment in second.stdout, (fragment, transcript)
    assert "done: every sample succeeded" in second.stderr, transcript

    with psycopg.connect(database) as conn:  # nothing converted twice
        row = conn.execute("SELECT count(*), count(*) FILTER (WHERE state = 'succeeded') FROM jobs")
        jobs, succeeded = row.fetchone() or (0, 0)
    pages_job = 1 if server == "docling-rs-mcp" else 0
    assert jobs == succeeded == len(samples) + pages_job
