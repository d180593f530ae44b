"""docs/schema.sql is what the migrations build (python scripts/schema_snapshot.py)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
snapshot = load_script("schema_snapshot")


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
