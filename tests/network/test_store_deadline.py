"""A store call on a link that went silent ends with E401 in seconds, not in the kernel's minutes.

A black hole sends no reset: a pooled connection looks alive, the query goes out and nothing
comes back. Without a TCP deadline of doclane's own (``DOCLANE_DATABASE_TCP_TIMEOUT_S``) the
call waits for the kernel to give up on its retransmissions, about 15 minutes, holding the
job's lease thread or the API's request all that time.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.network.fleet import Fleet

pytestmark = pytest.mark.network

PING_TWICE = """
import sys, time
from errors import classify
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore

store = JobStore(read_settings().store)
store.pool.ping()
print("connected", flush=True)
sys.stdin.readline()  # the test has cut the link
began = time.monotonic()
try:
    store.pool.ping()
    print("answered", flush=True)
except Exception as exc:
    print(classify(exc).code, round(time.monotonic() - began, 1), flush=True)
"""


def ping_across_a_cut(fleet: Fleet, tcp_timeout_s: str, tmp_path: Path) -> str:
    host = fleet.add_host() if not fleet.hosts else fleet.hosts[0]
    script = tmp_path / "ping.py"
    script.write_text(PING_TWICE)
    env = {**fleet.env, "DOCLANE_DATABASE_TCP_TIMEOUT_S": tcp_timeout_s}
    with subprocess.Popen(
        [*host.exec_prefix(), sys.executable, str(script)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "connected"
            host.cut(fleet.database.port)
            out, _ = child.communicate("go\n", timeout=30)
            return out.strip()
        except subprocess.TimeoutExpired:
            child.kill()
            return "hung"
        finally:
            host.heal()


def test_a_query_into_a_black_hole_fails_with_e401_within_the_tcp_timeout(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    answer = ping_across_a_cut(make_fleet(), "3", tmp_path)
    assert answer != "hung", "the query waited on the kernel's retransmissions"
    code, seconds = answer.split()
    assert code == "E401"
    assert float(seconds) < 15, "the deadline, not the kernel's retransmissions, ended it"
