"""Packages whose public names are imported on first use (PEP 562's module ``__getattr__``).

A package's ``__init__`` that imports its modules makes every importer pay for all of them:
``doclane submit`` needs three settings classes from ``pipeline.mcp``, ``pipeline.processing``
and ``pipeline.resilience`` (for the time limits it puts on each message), and importing the
packages for them brought in the MCP client, jsonschema, the processor, pybreaker and
redis.asyncio: 0.2 s of every submission's start.

Such a package writes each public name once, as an explicit re-export the type checker reads
(``from .breaker import OriginBreaker as OriginBreaker``) under ``if TYPE_CHECKING:``, and ends
with ``__getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)`` under ``if not
TYPE_CHECKING:``. At run time those same import statements, read from the package's source, say
where each name lives; the type checker never sees the module ``__getattr__``, which would make
it take any name as the package's, so it checks every importer's names against the
re-exports. tests/unit/support/test_lazy_exports.py resolves every name of every such package.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def exports(
    package: str, init_file: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``, whose ``__init__`` is
    ``init_file``: its names are those its ``if TYPE_CHECKING:`` block imports. A name once
    looked up becomes a plain attribute of the package."""
    where = type_checking_imports(Path(init_file).read_text(encoding="utf-8"))
    names = sorted(where)

    def __getattr__(name: str) -> Any:
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, original = found
        value = getattr(importlib.import_module(module, package), original)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return [*sys.modules[package].__dict__, *names]

    return __getattr__, __dir__, list(names)


def type_checking_imports(source: str) -> dict[str, tuple[str, str]]:
    """Each name the module-level ``if TYPE_CHECKING:`` blocks of ``source`` import with
    ``from ... import``: the module (relative ones with their dots) and the name there."""
    where: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom):
                module = "." * statement.level + (statement.module or "")
                for alias in statement.names:
                    where[alias.asname or alias.name] = (module, alias.name)
    return where


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
