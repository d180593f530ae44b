"""The usual mistakes, through the real ``doclane`` entry point: a short message saying what is
wrong and what to do, a non-zero exit, never a traceback; and stats still answer for the parts
that can be reached."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.brokers import Broker
from tests.support.cli import doclane

DEAD = "127.0.0.1:9"  # the discard port: nothing listens there


def test_a_database_without_migrations_says_to_migrate(
    empty_database_url: str, redis_broker: Broker, tmp_path: Path
) -> None:
    env = {"DOCLANE_DATABASE_URL": empty_database_url, "DOCLANE_BROKER_URL": redis_broker.url}
    listed = doclane("jobs", env=env, cwd=tmp_path)
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    assert "doclane db migrate" in listed.stderr.splitlines()[0]
    stats = doclane("stats", "--json", env=env, cwd=tmp_path)
    out = json.loads(stats.stdout)
    assert stats.returncode == 1 and out["ok"] is False and out["jobs"] is None
    assert "doclane db migrate" in out["unreachable"]["database"]
    assert out["bells"] is not None, "the broker still answered"


def test_the_commands_that_need_no_admin_views_also_say_to_migrate(
    empty_database_url: str, redis_broker: Broker, tmp_path: Path
) -> None:
    """Submitting, reading, cancelling a job and reconciling use the plain job store: a
    database without the schema is explained to them as to ``doclane jobs``."""
    env = {"DOCLANE_DATABASE_URL": empty_database_url, "DOCLANE_BROKER_URL": redis_broker.url}
    (tmp_path / "note.md").write_text("# a note\n")
    unknown = "0d6a0a56-3a3c-4a43-9c5e-1b7c2a0d0e11"
    for args in (
        ("submit", "note.md"),
        ("status", unknown),
        ("result", unknown),
        ("cancel", unknown),
        ("reconcile",),
    ):
        done = doclane(*args, env=env, cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "doclane db migrate" in done.stderr.splitlines()[0], args
    status = json.loads(doclane("status", unknown, "--json", env=env, cwd=tmp_path).stdout)
    assert status["ok"] is False and status["error"]["code"] == "E401"
    assert "doclane db migrate" in status["error"]["message"]


def test_an_unreachable_database_broker_and_redis_are_each_named(
    migrated_database_url: str, tmp_path: Path
) -> None:
    env = {
        "DOCLANE_DATABASE_URL": f"postgresql://postgres@{DEAD}/x",
        "DOCLANE_BROKER_URL": f"redis://{DEAD}/0",
        "DOCLANE_REDIS_URL": f"redis://{DEAD}/0",
        "DOCLANE_CONNECT_TIMEOUT_S": "1",
    }
    stats = doclane("stats", env=env, cwd=tmp_path)
    assert stats.returncode == 1 and "Traceback" not in stats.stderr
    lines = stats.stderr.strip().splitlines()
    assert {line.split()[0] for line in lines} == {"database", "broker", "workers", "redis"}
    assert all("unreachable" in line and ": check " in line for line in lines)

    env["DOCLANE_DATABASE_URL"] = migrated_database_url  # only the broker and Redis are down
    out = json.loads(doclane("stats", "--json", env=env, cwd=tmp_path).stdout)
    assert out["jobs"]["succeeded"] == 0 and set(out["unreachable"]) == {
        "broker",
        "workers",
        "redis",
    }


def test_an_unknown_or_malformed_job_id(
    migrated_database_url: str, redis_broker: Broker, tmp_path: Path
) -> None:
    env = {"DOCLANE_DATABASE_URL": migrated_database_url, "DOCLANE_BROKER_URL": redis_broker.url}
    unknown = "0d6a0a56-3a3c-4a43-9c5e-1b7c2a0d0e11"
    for command in ("status", "retry"):
        done = doclane(command, unknown, env=env, cwd=tmp_path)
        assert done.returncode == 1 and done.stderr.splitlines() == [
            f"E108 job not found: no job {unknown}",
            "not retryable: Check the id (doclane jobs, or GET /v1/jobs, lists them).",
        ]
    bad = doclane("status", "nope", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("E117 invalid argument: not a job id")
    both = doclane("retry", unknown, "--failed", env=env, cwd=tmp_path)
    assert both.returncode == 2 and "either a job id or --failed" in both.stderr
    nothing = json.loads(doclane("retry", "--failed", "--json", env=env, cwd=tmp_path).stdout)
    assert nothing == {"ok": True, "retried": []}


def test_the_api_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    done = doclane("api", "--port", "0", env={"DOCLANE_API_TOKEN": ""}, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("E120 invalid setting: DOCLANE_API_TOKEN is not set")
