"""``doclane submit --wait`` through a pipe, as a log or a script sees it: no progress bar's
frames, a plain line per change, and a wait that gives up says why and whether any worker is
alive (the fleet's heartbeats in Redis)."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest
import redis

from pipeline.admin.heartbeats import WorkerInfo, beat, stop_beating
from pipeline.resilience.settings import ResilienceSettings
from pipeline.store.store import JobStore
from tests.fixtures.brokers import Broker
from tests.support.cli import doclane


@pytest.fixture
def env(migrated_database_url: str, redis_broker: Broker, tmp_path: Path) -> dict[str, str]:
    return {
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_REDIS_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
    }


def test_a_finished_wait_through_a_pipe_prints_lines_not_bar_frames(
    env: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    """The document's twin succeeded already: deduplicated, the wait ends at its first look."""
    (tmp_path / "note.md").write_text("# a note\n")
    first = json.loads(doclane("submit", "note.md", "--json", env=env, cwd=tmp_path).stdout)
    job_id = UUID(first["accepted"][0]["job_id"])
    claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
    assert claimed is not None and store.attempts.finish(job_id, claimed.attempt, {"md": "# a"})
    done = doclane("submit", "note.md", "--wait", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr and "it/s" not in done.stderr
    assert "finished 1 of 1 job(s), 0 not succeeded" in done.stderr.splitlines()
    scripted = doclane("submit", "note.md", "--wait", "--json", env=env, cwd=tmp_path)
    assert scripted.returncode == 0 and "finished" not in scripted.stderr, scripted.stderr
    assert json.loads(scripted.stdout)["ok"] is True


def test_a_wait_that_gives_up_says_so_and_that_no_worker_is_alive(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "note.md").write_text("# a note\n")
    human = doclane("submit", "note.md", "--wait", "--timeout", "0", env=env, cwd=tmp_path)
    assert human.returncode == 1, human.stderr
    lines = human.stderr.splitlines()
    assert "gave up waiting after 0 s (--timeout): 1 job(s) not finished (1 queued)" in lines
    assert any(line.startswith("no worker is alive (no heartbeat in Redis)") for line in lines)
    out = json.loads(
        doclane(
            "submit", "note.md", "--no-dedup", "--wait", "--timeout", "0", "--json",
            env=env, cwd=tmp_path,
        ).stdout
    )  # fmt: skip
    assert out["ok"] is False and out["wait"]["unfinished"] == {"queued": 1}
    assert (out["wait"]["workers_alive"], out["wait"]["workers"]) == (0, [])


def test_a_wait_that_gives_up_names_the_workers_alive(
    env: dict[str, str], tmp_path: Path, redis_broker: Broker
) -> None:
    """A worker's heartbeat as a worker writes it: alive, so the jobs wait behind others."""
    namespace = ResilienceSettings.from_environment().breaker_namespace
    client = redis.Redis.from_url(redis_broker.url)
    beat(client, namespace, WorkerInfo(name="doclane-1@host", concurrency=2), 60.0)
    try:
        (tmp_path / "note.md").write_text("# a note\n")
        done = doclane(
            "submit", "note.md", "--wait", "--timeout", "0", "--json", env=env, cwd=tmp_path
        )
    finally:
        stop_beating(client, namespace, "doclane-1@host")
        client.close()
    wait = json.loads(done.stdout)["wait"]
    assert (wait["workers_alive"], wait["workers"]) == (1, ["doclane-1@host"])
    assert "1 worker(s) alive (doclane-1@host)" in wait["note"]


def test_a_wait_that_cannot_ask_redis_says_it_does_not_know(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "note.md").write_text("# a note\n")
    env = {**env, "DOCLANE_REDIS_URL": "redis://127.0.0.1:9/0", "DOCLANE_CONNECT_TIMEOUT_S": "1"}
    done = doclane("submit", "note.md", "--wait", "--timeout", "0", "--json", env=env, cwd=tmp_path)
    wait = json.loads(done.stdout)["wait"]
    assert wait["workers_alive"] is None
    assert wait["note"].startswith("whether any worker is alive is unknown: ")
