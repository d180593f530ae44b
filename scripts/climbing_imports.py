"""Count the imports inside pipeline/ that climb a layer: the edges of cycles between its parts.

::

    .venv/bin/python scripts/climbing_imports.py          # the parts that import each other
    .venv/bin/python scripts/climbing_imports.py -v       # and the module imports behind each

Each part of ``pipeline`` (a subpackage, or a top-level module such as ``queues``) is a node;
part A imports part B when some module of A imports some module of B, at the top, inside a
function or under ``TYPE_CHECKING`` alike (read from the source with ``ast``, so an import made
lazily for speed still counts). Parts that import one another, directly or round a longer
cycle, cannot be stacked in layers: within each such cycle, the edges that go from the part the
others stand on back up to them are the imports that climb. The script prints every cycle and
each part-to-part edge inside it; the import contracts (pyproject.toml) hold the rest of the
picture in place.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def part_of(module: str) -> str | None:
    names = module.split(".")
    return ".".join(names[:2]) if names[0] == "pipeline" and len(names) > 1 else None


def imports_between_parts(root: Path) -> dict[tuple[str, str], set[str]]:
    """(importing part, imported part) -> the module imports that make the edge."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in sorted((root / "pipeline").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        source = part_of(module)
        if source is None:
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    targets = [".".join([*base, *([node.module] if node.module else [])])]
                elif node.module:
                    targets = [node.module]
            for target in targets:
                imported = part_of(target)
                if imported is not None and imported != source:
                    edges[(source, imported)].add(f"{module} -> {target}")
    return edges


def cycles(edges: dict[tuple[str, str], set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one part (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(part: str) -> None:
        index[part] = low[part] = len(index)
        stack.append(part)
        on_stack.add(part)
        for other in sorted(graph[part]):
            if other not in index:
                visit(other)
                low[part] = min(low[part], low[other])
            elif other in on_stack:
                low[part] = min(low[part], index[other])
        if low[part] == index[part]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == part:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(10_000)
    for part in sorted({p for edge in edges for p in edge}):
        if part not in index:
            visit(part)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="list the module imports")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to read")
    args = parser.parse_args()
    edges = imports_between_parts(args.root)
    found = cycles(edges)
    mutual = sorted({tuple(sorted(edge)) for edge in edges if edge[::-1] in edges})
    print(f"{len(found)} cycle(s) between parts; {len(mutual)} pair(s) importing each other")
    for component in found:
        print("cycle:", ", ".join(sorted(component)))
        for (source, target), made_by in sorted(edges.items()):
            if source in component and target in component:
                print(f"  {source} -> {target} ({len(made_by)} import(s))")
                if args.verbose:
                    for line in sorted(made_by):
                        print(f"      {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
