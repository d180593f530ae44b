"""What a fresh interpreter prints: probes of what importing a module loads."""

from __future__ import annotations

import subprocess
import sys


def printed_by(probe: str, env: dict[str, str] | None = None) -> str:
    """What ``probe`` prints, run in a fresh interpreter (what it imports is all it loads)."""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()
