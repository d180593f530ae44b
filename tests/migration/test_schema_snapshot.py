"""migrations/schema.sql is what the migrations build (python scripts/schema_snapshot.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load_script() -> ModuleType:
    """scripts/schema_snapshot.py is a script, not a package module: load it from its file."""
    spec = importlib.util.spec_from_file_location(
        "doclane_schema_snapshot", ROOT / "scripts" / "schema_snapshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


snapshot = _load_script()


def test_the_committed_snapshot_is_the_migrated_schema(migrated_database_url: str) -> None:
    committed = snapshot.SNAPSHOT.read_text()
    assert committed == snapshot.render(migrated_database_url), (
        f"{snapshot.SNAPSHOT.relative_to(ROOT)} is stale: run {snapshot.COMMAND}"
    )


def test_the_snapshot_shows_tables_and_function_bodies() -> None:
    text = snapshot.SNAPSHOT.read_text()
    assert "CREATE TABLE public.jobs (" in text
    assert "CREATE FUNCTION public.finish_attempt(" in text and "RETURNING formats" in text
    assert "Dumped from" not in text and "\\restrict" not in text, "what differs between runs"
