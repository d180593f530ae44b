"""``doclane stats --watch`` redraws in place until Ctrl-C, then leaves quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for

#: Each redraw starts so (click drops the clear-screen sequence when stdout is not a terminal).
SCREEN = "doclane stats at "


@contextmanager
def _sigint_not_ignored() -> Iterator[None]:
    """Children started inside get SIGINT as a user's shell leaves it.

    A run started in the background (``scripts/test &``, ``nohup``) ignores SIGINT, every child
    inherits that, and Python installs no KeyboardInterrupt for a signal it finds ignored: the
    command would never see the Ctrl-C this test sends. A handler, unlike an ignored signal, is
    reset to the default in a child that execs."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_watch_redraws_until_interrupted(
    migrated_database_url: str, redis_broker: Broker, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INSPECT_TIMEOUT_S": "0.2",
    }
    with _sigint_not_ignored():
        process = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "stats", "--watch", "--interval", "0.2"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(lambda: process.stdout.read(1), "")))  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: "".join(seen).count(SCREEN) >= 3, timeout=60, message="three redraws")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            if process.poll() is None:  # it missed the Ctrl-C: fail without leaving it running
                process.kill()
            reader.join(timeout=30)
    screens = "".join(seen).split(SCREEN)[1:]
    assert all("jobs       queued 0" in screen for screen in screens[:3])
    assert process.returncode == 0
    assert "Traceback" not in (process.stderr.read() if process.stderr else "")
