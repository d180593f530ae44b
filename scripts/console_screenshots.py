"""Take the console's pictures in docs/ (console-list.png, console-job.png, console-upload.png).

They are taken by the browser test itself (tests/e2e/test_console.py), so they show what the
test just checked: a real ``doclane api``, real workers and the fake MCP server, driven by
Playwright in Debian's Chromium. Needs what the e2e tests need (scripts/test installs it).

    .venv/bin/python scripts/console_screenshots.py [folder]     # default: docs/
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("list", "job", "upload")


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs").resolve()
    env = {**os.environ, "DOCLANE_CONSOLE_SCREENSHOTS": str(folder)}
    test = "tests/e2e/test_console.py::test_the_console_end_to_end"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        return done.returncode
    for name in NAMES:
        print(folder / f"console-{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
