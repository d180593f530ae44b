"""Each test module stands alone: none imports another test module, a conftest, or a helper
kept beside some tests.

A helper a test module shares lives in tests/support (plain code) or tests/fixtures (pytest
fixtures), and the fake MCP server in tests/fakes, so a test file can be read, moved or
deleted without breaking another, and pytest never imports a test module twice under two names.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


#: The folders of tests/ that hold what test modules share.
SHARED = ("support", "fixtures", "fakes")


def _is_test_module(dotted: str) -> bool:
    """A test module, a conftest, or any module of a suite's folders (a helper beside tests)."""
    parts = dotted.split(".")
    last = parts[-1]
    if last == "conftest" or last.startswith("test_"):
        return True
    return len(parts) > 2 and parts[0] == "tests" and parts[1] not in SHARED


def imported_test_modules(source: str) -> list[str]:
    """The test modules, conftests and suites' helpers a module's source imports, by dotted
    name."""
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
                    if node.module.startswith("tests")
                    and _is_test_module(f"{node.module}.{alias.name}")
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
        "from tests.integration.store.builders import new_job\n"
        "from tests.network import fleet\n"
        "from tests.fixtures.waiting import wait_for\n"
        "from tests.fakes import mcp_server\n"
        "import pipeline\n"
    )
    assert imported_test_modules(source) == [
        "tests.unit.test_x",
        "tests.e2e.test_console",
        "tests.deploy.conftest",
        "tests.unit.test_y",
        ".",
        "tests.integration.store.builders",
        "tests.network.fleet",
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
