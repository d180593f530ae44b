"""The repository's scripts still run against the code as it is now.

A script nothing runs rots unseen: scripts/demo imported a settings function that had been
replaced, and failed on every fresh machine. The demo itself runs in tests/e2e/test_demo.py,
docsgen and schema_snapshot in the tests of what they generate, pin_image_requirements in
tests/deploy/test_images.py; the rest are run here, cheaply.
"""

from __future__ import annotations

import ast
import filecmp
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.scripts import SCRIPTS_DIR, load_script

ROOT = SCRIPTS_DIR.parent
SHELL_SCRIPTS = ("demo", "test", "lib.sh")


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_the_shell_scripts_parse(name: str) -> None:
    script = str(SCRIPTS_DIR / name)
    done = subprocess.run(["bash", "-n", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_shell_scripts_run_only_python_that_imports() -> None:
    """The Python one-liners the shell scripts run (``python -c '...'``) import only names
    that exist: each is compiled and its imports resolved, without running it."""
    snippets = []
    for name in SHELL_SCRIPTS:
        text = (SCRIPTS_DIR / name).read_text()
        snippets += re.findall(r"python\"? -c '([^']+)'", text)
    assert snippets
    for snippet in snippets:
        for node in ast.walk(ast.parse(snippet)):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = __import__(node.module, fromlist=["_"])
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}: {snippet}"


def test_make_examples_writes_the_samples_in_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte for byte, as its docstring promises: running it again changes nothing in git."""
    script = load_script("make_examples")
    kept = script.EXAMPLES
    monkeypatch.setattr(script, "EXAMPLES", tmp_path)
    script.main()
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(p.name for p in kept.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(tmp_path, kept, written, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


def test_climbing_imports_reads_the_tree() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS_DIR / "climbing_imports.py"), "-v"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.match(r"\d+ cycle\(s\) between parts", done.stdout), done.stdout


def test_console_screenshots_names_a_test_that_exists() -> None:
    script = load_script("console_screenshots")
    source = (SCRIPTS_DIR / "console_screenshots.py").read_text()
    (target,) = re.findall(r'"(tests/[\w/]+\.py)::(\w+)"', source)
    path, function = target
    assert f"def {function}(" in (ROOT / path).read_text()
    assert script.NAMES == ("list", "job", "upload")
    for name in script.NAMES:  # the pictures it retakes are the README's
        assert (ROOT / "docs" / f"console-{name}.png").is_file()
