"""The store's SQL, kept as data in ``sql/*.sql`` and looked up by name.

Each file groups the queries of one concern; each query starts with a ``-- name: <name>`` line
and runs to the next one. Keeping SQL out of Python lets it be read, reviewed and EXPLAINed
(``bench/store_admin_queries.py`` runs the very same text) as SQL.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME_LINE = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@cache
def all_queries() -> dict[str, str]:
    """Every named query of the package's ``sql/`` folder (read once, on first use)."""
    found: dict[str, str] = {}
    folder = resources.files("pipeline.store") / "sql"
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".sql"):
            continue
        for name, text in _split(item.read_text(encoding="utf-8")):
            if name in found:
                raise RuntimeError(f"query {name!r} is defined twice (second in {item.name})")
            found[name] = text
    return found


def query(name: str) -> str:
    """The SQL text of one named query; a missing name is a bug, so it raises ``KeyError``."""
    return all_queries()[name]


def _split(text: str) -> list[tuple[str, str]]:
    marks = list(_NAME_LINE.finditer(text))
    out = []
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        body = text[mark.end() : end].strip()
        if not body:
            raise RuntimeError(f"query {mark.group(1)!r} is empty")
        out.append((mark.group(1), body))
    return out
