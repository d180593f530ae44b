"""The exception tree drawn in ``errors``' docstring is the whole tree: every exception class
doclane's packages define is drawn under its real parent."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import errors
import pipeline
import workers

_ROOT = re.compile(r"^(?P<name>[A-Z]\w*)\b")
_BRANCH = re.compile(r"^(?P<indent>(?:[│ ]   )*)[├└]── (?P<name>[A-Z]\w*)\b")


def drawn_tree(docstring: str) -> dict[str, str | None]:
    """Every class drawn in the docstring's ``::`` blocks, with the class drawn as its parent
    (None for a root)."""
    parents: dict[str, str | None] = {}
    lines = docstring.splitlines()
    in_block = False
    path: list[str] = []
    for previous, line in zip(["", *lines], lines, strict=False):
        if previous.rstrip().endswith("::"):
            in_block = True
        if not in_block or not line.strip():
            continue
        if not line.startswith("    "):
            in_block = False
            continue
        drawing = line[4:]
        root, branch = _ROOT.match(drawing), _BRANCH.match(drawing)
        if root is not None:
            path = [root["name"]]
            parents[root["name"]] = None
        elif branch is not None:
            depth = len(branch["indent"]) // 4 + 1
            path = [*path[:depth], branch["name"]]
            parents[branch["name"]] = path[depth - 1]
    return parents


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined at the top of a module of errors, pipeline and workers."""
    modules: list[ModuleType] = []
    for package in (errors, pipeline, workers):
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.endswith("__main__"):
                modules.append(importlib.import_module(info.name))
    found: dict[str, type[BaseException]] = {}
    for module in modules:
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                assert found.get(name, value) is value, f"two exception classes named {name}"
                found[name] = value
    return found


def test_the_tree_parser_reads_roots_branches_and_depth() -> None:
    drawing = "The tree::\n\n    A\n    ├── B\n    │   └── C   text\n    │       more text\n"
    drawing += "    └── D\n    E\n    └── F\n\nProse after.\n    G\n"
    assert drawn_tree(drawing) == {"A": None, "B": "A", "C": "B", "D": "A", "E": None, "F": "E"}


def test_every_exception_class_is_drawn_under_its_parent() -> None:
    drawn = drawn_tree(errors.__doc__ or "")
    defined = defined_exceptions()
    missing = set(defined) - set(drawn)
    assert not missing, f"exception classes missing from the tree in errors/__init__.py: {missing}"
    for name, parent in drawn.items():
        cls = defined.get(name) or getattr(builtins, name, None)
        assert cls is not None, f"{name} is drawn but no such exception class exists"
        if parent is not None:
            assert cls.__bases__[0].__name__ == parent, f"{name} is drawn under {parent}"
