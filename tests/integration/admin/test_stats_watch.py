"""``doclane stats --watch`` redraws in place until Ctrl-C, then leaves quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for

#: Each redraw starts so (click drops the clear-screen sequence when stdout is not a terminal).
SCREEN = "doclane stats at "


def test_watch_redraws_until_interrupted(
    migrated_database_url: str, redis_broker: Broker, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INSPECT_TIMEOUT_S": "0.2",
    }
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
        process.wait(timeout=30)
        reader.join(timeout=30)
    screens = "".join(seen).split(SCREEN)[1:]
    assert all("jobs       queued 0" in screen for screen in screens[:3])
    assert process.returncode == 0
    assert "Traceback" not in (process.stderr.read() if process.stderr else "")
