"""The migration runner and ``doclane db``: in order, once, checksummed, safe to race."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pipeline.settings.tree import read_settings
from pipeline.store.database import apply_migrations, migration_status
from pipeline.store.migrations import MIGRATION_LOCK_KEY, MigrationError, MigrationState, discover
from pipeline.store.settings import DEFAULT_MIGRATIONS_DIR
from tests.fixtures.database import ScratchDatabases, database_url
from tests.fixtures.waiting import wait_for

DOCLANE = str(Path(sys.executable).with_name("doclane"))
VERSIONS = [m.version for m in discover(DEFAULT_MIGRATIONS_DIR)]


def doclane_db(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DOCLANE, "db", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def start_doclane_db(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [DOCLANE, "db", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def ledger(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT version, checksum FROM schema_migrations ORDER BY version"
        ).fetchall()


@pytest.fixture
def own_migrations(tmp_path: Path) -> Path:
    """A copy of the real migrations that a test may edit."""
    folder = tmp_path / "migrations"
    shutil.copytree(DEFAULT_MIGRATIONS_DIR, folder)
    return folder


def test_the_migrations_apply_on_an_empty_database_and_then_do_nothing(
    empty_database_url: str,
) -> None:
    settings = read_settings(store=dict(database_url=empty_database_url)).store
    assert [m.version for m in apply_migrations(settings)] == VERSIONS
    assert apply_migrations(settings) == []
    statuses = migration_status(settings)
    assert [(s.version, s.state) for s in statuses] == [
        (v, MigrationState.APPLIED) for v in VERSIONS
    ]
    files = {m.version: m.checksum for m in discover(DEFAULT_MIGRATIONS_DIR)}
    assert dict(ledger(empty_database_url)) == files
    with psycopg.connect(empty_database_url) as conn:
        tables = {
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
    assert {"jobs", "results", "job_events", "job_state_transitions", "schema_migrations"} <= tables


def test_doclane_db_migrate_creates_the_database_and_runs_twice(
    test_databases: ScratchDatabases,
) -> None:
    url = database_url(test_databases.new_name())
    first = doclane_db("migrate", "--json", "--database-url", url)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["created_database"] is True
    assert report["applied"] == [f"{m.version}_{m.name}" for m in discover(DEFAULT_MIGRATIONS_DIR)]

    second = doclane_db("migrate", "--json", "--database-url", url)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["applied"] == []
    assert json.loads(second.stdout)["created_database"] is False

    status = doclane_db("status", "--json", "--database-url", url)
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["up_to_date"] is True
    assert [(m["version"], m["state"]) for m in shown["migrations"]] == [
        (v, "applied") for v in VERSIONS
    ]

    text = doclane_db("status", "--database-url", url)
    assert text.returncode == 0 and text.stdout.count("applied") == len(VERSIONS)


def test_processes_migrating_at_once_apply_each_file_exactly_once(
    test_databases: ScratchDatabases,
) -> None:
    """Three real processes race from a database that does not exist yet."""
    url = database_url(test_databases.new_name())
    runners = [start_doclane_db("migrate", "--json", "--database-url", url) for _ in range(3)]
    outputs = [runner.communicate(timeout=120) for runner in runners]
    assert [r.returncode for r in runners] == [0, 0, 0], [err for _, err in outputs]
    applied = [name for out, _ in outputs for name in json.loads(out)["applied"]]
    assert sorted(applied) == sorted(
        f"{m.version}_{m.name}" for m in discover(DEFAULT_MIGRATIONS_DIR)
    )
    assert sum(json.loads(out)["created_database"] for out, _ in outputs) == 1
    assert [v for v, _ in ledger(url)] == VERSIONS


def test_a_runner_waits_for_the_advisory_lock(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        runner = start_doclane_db("migrate", "--json", "--database-url", empty_database_url)
        try:
            wait_for(
                lambda: (
                    holder.execute(
                        "SELECT count(*) FROM pg_locks JOIN pg_database d ON d.oid = database"
                        " WHERE locktype = 'advisory' AND NOT granted"
                        " AND d.datname = current_database()"
                    ).fetchone()
                    == (1,)
                ),
                timeout=60,
                message="the runner waiting for the migration lock",
            )
            exists = holder.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
            assert exists.fetchone() == (False,)
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        _, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, err
    assert [v for v, _ in ledger(empty_database_url)] == VERSIONS


def test_a_changed_migration_file_is_refused_by_name(
    empty_database_url: str, own_migrations: Path
) -> None:
    settings = read_settings(
        store=dict(database_url=empty_database_url, migrations_dir=own_migrations)
    ).store
    apply_migrations(settings)
    edited = own_migrations / "0002_results_and_events.sql"
    edited.write_text(edited.read_text() + "\n-- an afterthought\n")
    (own_migrations / "0099_later.sql").write_text("CREATE TABLE later (id int);\n")

    with pytest.raises(MigrationError, match=r"0002_results_and_events\.sql was changed"):
        apply_migrations(settings)
    with psycopg.connect(empty_database_url) as conn:  # nothing of the refused run was applied
        assert conn.execute("SELECT to_regclass('later')").fetchone() == (None,)

    cli = doclane_db(
        "migrate", "--database-url", empty_database_url, "--migrations-dir", str(own_migrations)
    )
    assert cli.returncode == 1
    assert "0002_results_and_events.sql was changed" in cli.stderr
    status = doclane_db(
        "status",
        "--json",
        "--database-url",
        empty_database_url,
        "--migrations-dir",
        str(own_migrations),
    )
    assert status.returncode == 1
    states = {m["version"]: m["state"] for m in json.loads(status.stdout)["migrations"]}
    assert states["0002"] == "changed" and states["0099"] == "pending"


def test_a_migration_unknown_to_these_files_is_refused(
    empty_database_url: str, own_migrations: Path
) -> None:
    apply_migrations(read_settings(store=dict(database_url=empty_database_url)).store)
    last = sorted(own_migrations.glob("*.sql"))[-1]
    last.unlink()
    older = read_settings(
        store=dict(database_url=empty_database_url, migrations_dir=own_migrations)
    ).store
    with pytest.raises(MigrationError, match=f"has migration {last.stem}"):
        apply_migrations(older)
    assert migration_status(older)[-1].state is MigrationState.UNKNOWN


def test_a_failing_migration_leaves_no_trace_and_can_be_fixed(
    empty_database_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_first.sql").write_text("CREATE TABLE first (id int);\n")
    (folder / "0002_broken.sql").write_text("CREATE TABLE half (id int);\nSELECT 1 / 0;\n")
    settings = read_settings(
        store=dict(database_url=empty_database_url, migrations_dir=folder)
    ).store
    with pytest.raises(MigrationError, match=r"0002_broken\.sql failed"):
        apply_migrations(settings)
    assert [v for v, _ in ledger(empty_database_url)] == ["0001"]
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT to_regclass('half')").fetchone() == (None,)
    (folder / "0002_broken.sql").write_text("CREATE TABLE half (id int);\n")
    assert [m.version for m in apply_migrations(settings)] == ["0002"]


@pytest.mark.parametrize("name", ["2_short.sql", "0003-dash.sql", "0003_Upper.sql"])
def test_a_misnamed_migration_file_is_an_error(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("SELECT 1;\n")
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        discover(tmp_path)


def test_two_files_with_one_version_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;\n")
    (tmp_path / "0001_b.sql").write_text("SELECT 1;\n")
    with pytest.raises(MigrationError, match="version 0001"):
        discover(tmp_path)


def test_migrations_checked_out_with_crlf_apply_and_stay_clean(
    own_migrations: Path, test_databases: ScratchDatabases
) -> None:
    """A Windows checkout (or a careless editor) turns every LF into CRLF: still the same SQL."""
    for path in own_migrations.glob("*.sql"):
        path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    url = database_url(test_databases.new_name())
    env = {"DOCLANE_MIGRATIONS_DIR": str(own_migrations)}
    applied = doclane_db("migrate", "--json", "--database-url", url, env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert len(json.loads(applied.stdout)["applied"]) == len(VERSIONS)
    status = doclane_db("status", "--json", "--database-url", url, env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["up_to_date"] is True
    # ... and the same database is clean for the LF originals: one migration, one checksum.
    original = doclane_db("status", "--json", "--database-url", url)
    assert original.returncode == 0, original.stderr
    assert {m["state"] for m in json.loads(original.stdout)["migrations"]} == {"applied"}
