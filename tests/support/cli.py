"""Running the doclane CLI as a user does, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def doclane(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
