"""Who may import whom (docs/architecture.md), as import-linter contracts in pyproject.toml:
a forbidden import fails the suite, naming the contract and the import chain."""

from __future__ import annotations

import subprocess
import sys
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
