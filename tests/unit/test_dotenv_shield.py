"""A developer's ``.env`` where pytest is started reaches no test's settings
(tests/fixtures/isolation.py, registered for the whole tree by tests/conftest.py).

A pytest run of its own, started in a folder holding a ``.env`` that changes a setting, with
only the shield as a plugin: its test module reads the setting at import (collection time) and
again inside a test, and both must see the default.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.resilience.settings import ResilienceSettings

ROOT = Path(__file__).resolve().parents[2]

INNER_TEST = """
from pipeline.settings.tree import read_settings

AT_IMPORT = read_settings().resilience.retry_max_tries


def test_the_dotenv_is_not_read():
    assert (AT_IMPORT, read_settings().resilience.retry_max_tries) == ({default}, {default})
"""


def test_a_dotenv_where_pytest_starts_does_not_reach_settings(tmp_path: Path) -> None:
    default = ResilienceSettings.model_fields["retry_max_tries"].default
    started_in = tmp_path / "checkout"
    started_in.mkdir()
    (started_in / ".env").write_text(f"DOCLANE_RETRY_MAX_TRIES={default + 40}\n")
    (started_in / "test_inner.py").write_text(INNER_TEST.format(default=default))

    shielded = run_pytest(started_in, "-p", "tests.fixtures.isolation")
    assert shielded.returncode == 0, shielded.stdout + shielded.stderr
    # The same run without the shield reads the .env: the check above can fail.
    bare = run_pytest(started_in)
    assert bare.returncode == 1 and f"{default + 40}" in bare.stdout, bare.stdout + bare.stderr


def run_pytest(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest on the folder's test_inner.py, started there, with none of this run's plugins."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "test_inner.py"],
        check=False,
        cwd=folder,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
