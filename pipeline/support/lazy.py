"""Packages whose public names are imported on first use (PEP 562's module ``__getattr__``).

A package's ``__init__`` that imports its modules makes every importer pay for all of them:
``doclane submit`` needs three settings classes from ``pipeline.mcp``, ``pipeline.processing``
and ``pipeline.resilience`` (for the time limits it puts on each message), and importing the
packages for them brought in the MCP client, jsonschema, the processor, pybreaker and
redis.asyncio: 0.2 s of every submission's start. A package lists its names and
the module each lives in; the type checker reads the same imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``where`` maps each public name to its module
    (relative, e.g. ``".breaker"``). A name once looked up becomes a plain attribute."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
