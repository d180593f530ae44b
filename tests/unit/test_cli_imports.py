"""The CLI's modules import one another in one direction: the command modules over the helpers
(output, store_access, wiring), never a cycle, and nothing private taken from a sibling.

Read from the source rather than by importing: an import inside a function runs only when its
command does, so a cycle closed that way never fails at import time, yet it is a cycle all the
same (two modules that each need the other's insides).
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pipeline.cli

CLI = Path(pipeline.cli.__file__).parent
PACKAGE = "pipeline.cli"


def sibling_imports(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """Each module of ``folder`` (the CLI package) with the (sibling module, name) pairs it
    imports, wherever in the module the import statement stands; a plain ``import`` of a
    sibling gives the name ``*``."""
    modules = {path.stem for path in folder.glob("*.py")}
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(folder.glob("*.py")):
        pairs: list[tuple[str, str]] = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level == 1:
                    module = f"{PACKAGE}.{module}".rstrip(".")
                for alias in node.names:
                    if module == PACKAGE and alias.name in modules:  # from . import x
                        pairs.append((alias.name, "*"))
                    elif module.startswith(f"{PACKAGE}."):
                        pairs.append((module.removeprefix(f"{PACKAGE}."), alias.name))
            elif isinstance(node, ast.Import):
                pairs.extend(
                    (alias.name.removeprefix(f"{PACKAGE}."), "*")
                    for alias in node.names
                    if alias.name.startswith(f"{PACKAGE}.")
                )
        found[path.stem] = pairs
    return found


def cycle_among(imports: dict[str, list[tuple[str, str]]]) -> list[str] | None:
    graph = {module: {sibling for sibling, _ in pairs} for module, pairs in imports.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_the_command_modules_and_their_helpers_import_each_other_in_no_cycle() -> None:
    imports = sibling_imports(CLI)
    assert {"jobs_commands", "admin_commands", "store_access"} <= imports.keys()
    assert cycle_among(imports) is None


def test_no_cli_module_takes_a_private_name_from_another() -> None:
    taken = [
        f"{module} imports {name} from {sibling}"
        for module, pairs in sibling_imports(CLI).items()
        for sibling, name in pairs
        if name.startswith("_") and sibling != module
    ]
    assert taken == []
