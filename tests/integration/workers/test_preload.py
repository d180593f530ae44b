"""A worker's parent imports what its pool processes build their runtime from, before it forks
them: a pool process that builds its runtime imports nothing of doclane's then (each import after
the fork was about 0.4 s of CPU per pool process, and a page of its own)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import sys
from pipeline.settings.tree import read_settings
from workers.app import create_app
from workers.runtime import preload, start_runtime, stop_runtime
create_app(read_settings())
if sys.argv[1] == "preload":
    preload()
before = set(sys.modules)
start_runtime()  # a pool process after the fork, as worker_process_init runs it (unwarmed)
stop_runtime()
print(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("pipeline", "workers")))
"""


def imported_after_the_fork(how: str, database_url: str) -> str:
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": database_url,
        "DOCLING_MCP_ORIGIN": "http://127.0.0.1:9/mcp",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, how], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


def test_a_preloaded_pool_process_imports_nothing_of_doclane_to_build_its_runtime(
    migrated_database_url: str,
) -> None:
    assert imported_after_the_fork("preload", migrated_database_url) == "[]"
    # without the preload, the same runtime is built from modules imported there and then
    imported = imported_after_the_fork("no", migrated_database_url)
    assert "pipeline.processing.processor" in imported and "workers.assembly" in imported
