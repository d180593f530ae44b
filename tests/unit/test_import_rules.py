"""Who may import whom (docs/architecture.md), as import-linter contracts in pyproject.toml:
a forbidden import fails the suite, naming the contract and the import chain. And the rule that
lets those contracts see every import: a package's ``__init__`` imports nothing, and no name is
imported by a string at run time."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_every_import_contract_is_kept() -> None:
    done = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    assert " 0 broken" in done.stdout and " kept" in done.stdout


def test_no_import_cycle_in_pipeline() -> None:
    """No import cycle between pipeline's modules, type-only imports (``TYPE_CHECKING``) counted:
    a cycle that only the type checker walks still ties the modules into one unit to read, to
    test and to move. Each direct import ``a -> b`` is part of a cycle when ``b`` reaches
    ``a`` again; the message names the way back."""
    graph = grimp.build_graph("pipeline", exclude_type_checking_imports=False)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_two_parts_of_pipeline_import_each_other() -> None:
    """Between pipeline's parts (a subpackage, or a top-level module such as ``queues``) the
    imports go one way, so the parts stack in layers: a part that imports a part importing it,
    even through modules that form no cycle, ties the two into one to read and to move. The
    message names each edge that closes a cycle and the modules behind it."""
    graph = grimp.build_graph("pipeline", exclude_type_checking_imports=False)

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, set[str]] = {}
    behind: dict[tuple[str, str], list[str]] = {}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = part(importer), part(imported)
            if a != b and "." in a and "." in b:
                edges.setdefault(a, set()).add(b)
                behind.setdefault((a, b), []).append(f"{importer} -> {imported}")

    def reaches(start: str, goal: str) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    closing = [
        f"{a} -> {b} ({', '.join(sorted(behind[a, b]))})"
        for a in sorted(edges)
        for b in sorted(edges[a])
        if reaches(b, a)
    ]
    assert not closing, "parts importing each other:\n" + "\n".join(closing)


#: The packages whose ``__init__`` is code, not a list of names: the console script's module
#: (``[project.scripts]``, ``doclane = "pipeline.cli:main"``), which every installed environment's
#: ``doclane`` imports by that name.
ENTRY_POINTS = {
    value.partition(":")[0]
    for value in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ].values()
}


def _modules(tree: str) -> list[Path]:
    return sorted((ROOT / tree).rglob("*.py"))


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_no_package_init_imports_anything() -> None:
    """An ``__init__`` that imports its modules makes every importer of one of them pay for all
    (``doclane submit`` would load the MCP client, jsonschema, pybreaker and redis.asyncio for
    three settings classes); one that imports them on first use hides its edges from the type
    checker and the import graph. So importers name the defining module, and an ``__init__``
    is its docstring (``from __future__`` aside)."""
    found = []
    for init in [*_modules("pipeline"), *_modules("workers")]:
        if init.name != "__init__.py" or _dotted(init) in ENTRY_POINTS:
            continue
        for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) or (
                isinstance(node, ast.ImportFrom) and node.module != "__future__"
            ):
                found.append(f"{init.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "package __init__s that import (name the module instead):\n" + "\n".join(
        found
    )


def test_no_import_by_a_string() -> None:
    """``importlib.import_module`` and ``__import__`` resolve a name the type checker and the
    import graph cannot see: neither pipeline/ nor workers/ uses them."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in [*_modules("pipeline"), *_modules("workers")]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "import_module" in line or "__import__" in line
    ]
    assert not found, "imports by a string:\n" + "\n".join(found)
