"""Every way a command fails, through the real ``doclane`` entry point: the catalog code as a
field (``--json``: ``{"ok": false, "error": {"code", "retryable", "action", ...}}``), and for
people the code on the first line of stderr, then whether it is retryable and what to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from errors import CATALOG
from pipeline.jobs.model import JobState
from pipeline.store.store import JobStore
from tests.fixtures.brokers import Broker
from tests.support.cli import doclane
from tests.support.store_builders import job_in_state

UNKNOWN = "0d6a0a56-3a3c-4a43-9c5e-1b7c2a0d0e11"


@pytest.fixture
def env(migrated_database_url: str, redis_broker: Broker, tmp_path: Path) -> dict[str, str]:
    return {
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_REDIS_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
    }


def refused(
    args: tuple[str, ...], code: str, *, env: dict[str, str], cwd: Path, status: int = 1
) -> tuple[str, dict[str, Any] | None]:
    """Run ``args`` as people and as scripts do; both must fail with ``code``, and say it as
    the catalog does. The human form's first line and the JSON error (None for ``doclane
    api``, a server, which has no ``--json``)."""
    entry = CATALOG[code]
    human = doclane(*args, env=env, cwd=cwd)
    assert human.returncode == status, (args, human.stderr, human.stdout)
    assert "Traceback" not in human.stderr
    lines = [line for line in human.stderr.splitlines() if not line.startswith(("Usage:", "Try "))]
    assert lines[0].startswith(f"{code} {entry.title}: "), (args, human.stderr)
    again = "retryable" if entry.retryable else "not retryable"
    assert lines[1] == f"{again}: {entry.action}", (args, human.stderr)
    if args[0] == "api":
        return lines[0], None
    scripted = doclane(*args, "--json", env=env, cwd=cwd)
    assert scripted.returncode == status, (args, scripted.stderr)
    out = json.loads(scripted.stdout)
    error = out["error"]
    assert out["ok"] is False and error["code"] == code, (args, out)
    assert (error["action"], error["retryable"]) == (entry.action, entry.retryable)
    assert error["message"] == lines[0].removeprefix(f"{code} {entry.title}: ")
    return lines[0], error


def test_an_unknown_job_is_e108_for_every_command_that_takes_one(
    env: dict[str, str], tmp_path: Path
) -> None:
    for command in ("status", "result", "cancel", "retry"):
        first, error = refused((command, UNKNOWN), "E108", env=env, cwd=tmp_path)
        assert UNKNOWN in first and error is not None and error["detail"] == {"job_id": UNKNOWN}


def test_what_a_jobs_state_does_not_allow_is_e118(
    env: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    queued = job_in_state(store, JobState.QUEUED)
    first, _ = refused(("result", str(queued.id)), "E118", env=env, cwd=tmp_path)
    assert "queued: no results" in first
    cancelled = job_in_state(store, JobState.CANCELLED)
    first, _ = refused(("cancel", str(cancelled.id)), "E118", env=env, cwd=tmp_path)
    assert "already cancelled" in first
    running = job_in_state(store, JobState.RUNNING)
    first, _ = refused(("retry", str(running.id)), "E118", env=env, cwd=tmp_path)
    assert "nothing to retry" in first


def test_a_refused_retry_carries_the_sources_own_code_as_a_field(
    env: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    """The failed job's file is gone: resubmitting it is refused with E101, which is the
    error's code, not words inside its message."""
    failed = job_in_state(store, JobState.FAILED, source_uri=str(tmp_path / "gone.docx"))
    first, error = refused(("retry", str(failed.id)), "E101", env=env, cwd=tmp_path)
    assert error is not None and not error["message"].startswith("E101") and "gone.docx" in first
    assert error["detail"] == {"retry_of": str(failed.id)}


def test_a_wrong_argument_is_e117_and_exit_2(
    env: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    done = job_in_state(store, JobState.SUCCEEDED)
    (tmp_path / "note.md").write_text("# a note\n")
    cases: list[tuple[tuple[str, ...], str]] = [
        (("status", "nope"), "not a job id"),
        (("result", str(done.id), "--format", "html"), "has no html result"),
        (("submit", "note.md", "--to", "pdf"), "pdf"),
        (("submit", "note.md", "--tenant", "Team A"), "Team A"),
        (("submit", "note.md", "--no-such-option"), "No such option"),
        (("submit",), "Missing argument"),
        (("retry", UNKNOWN, "--failed"), "either a job id or --failed"),
        (("jobs", "--batch", "nope"), "not a submission id"),
        (("jobs", "--error-code", "oops"), "not an error code"),
        (("jobs", "--since", "yesterday"), "yesterday"),
        (("tenants", "set", "ok", "--max-running", "lots"), "--max-running"),
        (("mcp", "tools", "--origin", "http://a", "--command", "x"), "not both"),
    ]
    for args, said in cases:
        first, _ = refused(args, "E117", env=env, cwd=tmp_path, status=2)
        assert said in first, (args, first)


def test_migrations_that_cannot_be_applied_are_e403(env: dict[str, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-folder")
    for command in ("migrate", "status"):
        first, _ = refused(
            ("db", command, "--migrations-dir", missing), "E403", env=env, cwd=tmp_path
        )
        assert "migrations folder not found" in first
    out = json.loads(
        doclane("db", "status", "--migrations-dir", missing, "--json", env=env, cwd=tmp_path).stdout
    )
    assert "database" in out, "the JSON still says which database it was at"


def test_a_folder_with_nothing_to_convert_is_e119(env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / ".hidden.md").write_text("# hidden\n")
    (folder / "tool.exe").write_bytes(b"MZ")
    first, error = refused(("submit", "empty"), "E119", env=env, cwd=tmp_path)
    assert "empty" in first and "1 hidden" in first and "1 unsupported" in first
    assert error is not None and error["detail"]["skipped"] == {"hidden": 1, "unsupported": 1}


def test_bare_tenants_lists_them_as_tenants_list_does(env: dict[str, str], tmp_path: Path) -> None:
    bare = doclane("tenants", env=env, cwd=tmp_path)
    listed = doclane("tenants", "list", env=env, cwd=tmp_path)
    assert bare.returncode == 0 and bare.stdout == listed.stdout, bare.stderr
    assert bare.stdout.splitlines()[1].startswith("default ")
    out = json.loads(doclane("tenants", "--json", env=env, cwd=tmp_path).stdout)
    assert out["ok"] is True and [t["tenant"]["name"] for t in out["tenants"]] == ["default"]


@pytest.mark.parametrize(
    ("variables", "args", "named", "wants"),
    [
        (
            {"DOCLANE_API_TOKENS": '[{"name": "a", "role": "admin", "token": "s", "tenant": "A"}]'},
            ("api", "--port", "0"),
            "DOCLANE_API_TOKENS[0].tenant",
            "should match pattern",
        ),
        (
            {"DOCLANE_API_TOKENS": "ci:boss:s3cret"},
            ("api", "--port", "0"),
            "DOCLANE_API_TOKENS[0].role",
            "'read', 'submit' or 'admin'",
        ),
        ({"DOCLANE_RETRY_MAX_TRIES": "0"}, ("stats",), "DOCLANE_RETRY_MAX_TRIES", "1"),
        ({"DOCLANE_API_PORT": "eighty"}, ("jobs",), "DOCLANE_API_PORT", "valid integer"),
        ({"DOCLING_MCP_ORIGIN": ""}, ("mcp", "tools"), "DOCLING_MCP_ORIGIN", "empty"),
        ({"DOCLANE_API_TOKEN": ""}, ("api", "--port", "0"), "DOCLANE_API_TOKEN", "not set"),
    ],
)
def test_a_malformed_setting_names_its_variable_and_what_it_wants(
    variables: dict[str, str],
    args: tuple[str, ...],
    named: str,
    wants: str,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    first, _ = refused(args, "E120", env={**env, **variables}, cwd=tmp_path)
    assert first.startswith(f"E120 invalid setting: {named}") or named in first, first
    assert wants in first
    for value in variables.values():
        assert not value or "s3cret" not in first, "a setting's value is never shown"
