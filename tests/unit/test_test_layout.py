"""Each test module stands alone: none imports another test module or a conftest.

A helper a test module shares lives in tests/support (plain code) or tests/fixtures (pytest
fixtures), so a test file can be read, moved or deleted without breaking another, and pytest
never imports a test module twice under two names.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _is_test_module(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def imported_test_modules(source: str) -> list[str]:
    """The test modules and conftests a module's source imports, by dotted name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _is_test_module(node.module):
                found.append(node.module)
            else:
                found += [
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if node.module.startswith("tests") and _is_test_module(alias.name)
                ]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append("." * node.level + (node.module or ""))  # relative: tests are no package
    return found


def test_the_finder_sees_each_way_of_importing_a_test_module() -> None:
    source = (
        "import tests.unit.test_x\n"
        "from tests.e2e.test_console import browser\n"
        "from tests.deploy.conftest import ROOT\n"
        "from tests.unit import test_y\n"
        "from . import helpers\n"
        "from tests.support.readme import shell_blocks\n"
        "import pipeline\n"
    )
    assert imported_test_modules(source) == [
        "tests.unit.test_x",
        "tests.e2e.test_console",
        "tests.deploy.conftest",
        "tests.unit.test_y",
        ".",
    ]


def test_no_test_module_imports_a_test_module_or_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in imported_test_modules(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "move the shared helpers to tests/support or tests/fixtures:\n" + (
        "\n".join(offenders)
    )
