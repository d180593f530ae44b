"""What ``doclane stats --json`` loads, the admin's status query: only what it asks with
(PostgreSQL's client, Redis's, the admin views), never what other commands convert, submit or
run workers with. Read from the process's ``sys.modules`` as it exits: a module that creeps
back onto its path fails here whatever the machine's speed (bench/stats_start.py times it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis

from pipeline.admin.heartbeats import WorkerInfo, beat, stop_beating
from pipeline.queues import ALL_QUEUES
from pipeline.resilience.settings import ResilienceSettings
from tests.fixtures.brokers import Broker

#: Top-level packages, and doclane's modules, that ``stats`` has no use for.
NOT_FOR_STATS = (
    "celery",
    "kombu",  # the queue depths come from a live worker's heartbeat
    "amqp",
    "billiard",
    "vine",
    "yaml",  # kombu's serializers load it; the settings tree does not
    "workers",
    "httpx",
    "jsonschema",
    "rich",
    "pipeline.mcp.client",
    "pipeline.profiles.base",
    "pipeline.profiles.selection",
    "pipeline.processing.processor",
    "pipeline.submission",
    "pipeline.sources.expansion",
    "pipeline.webhooks.sender",
    # the store's parts a worker, a submission or an operator writes through
    "pipeline.store.attempts",
    "pipeline.store.finishing",
    "pipeline.store.result_objects",
    "pipeline.store.submissions",
    "pipeline.store.operations",
    "pipeline.store.access",
    "pipeline.store.database",
)


#: Runs the command as ``doclane`` runs it, and writes the modules loaded when it exits.
_PROBE = (
    "import atexit, json, runpy, sys; listing = sys.argv[1]; "
    "atexit.register(lambda: open(listing, 'w').write(json.dumps(sorted(sys.modules)))); "
    "sys.argv = ['doclane', *sys.argv[2:]]; "
    "runpy.run_module('pipeline.cli', run_name='__main__')"
)


def imported_by(args: list[str], env: dict[str, str], cwd: Path) -> tuple[set[str], str]:
    """The modules loaded by ``doclane ARGS`` when it exits (``sys.modules``: lazy imports
    through ``importlib`` too, which ``-X importtime`` does not report), and its stdout."""
    listing = cwd / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(listing), *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(listing.read_text())), done.stdout


def test_stats_loads_nothing_it_does_not_ask_with(
    migrated_database_url: str, redis_broker: Broker, tmp_path: Path
) -> None:
    namespace = ResilienceSettings.from_environment().breaker_namespace
    client = redis.Redis.from_url(redis_broker.url)
    counts = dict.fromkeys(ALL_QUEUES, 0)  # as a worker counts them, the control queue too
    beat(client, namespace, WorkerInfo(name="doclane-1@host"), 60.0, depths=counts)
    env = {
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_REDIS_URL": redis_broker.url,
    }
    try:
        names, stdout = imported_by(["stats", "--json"], env, tmp_path)
    finally:
        stop_beating(client, namespace, "doclane-1@host")
        client.close()
    out = json.loads(stdout)
    assert out["ok"] is True and [w["name"] for w in out["workers"]] == ["doclane-1@host"]
    assert {"psycopg", "redis", "pipeline.admin.stats"} <= names, "stats asked its three parts"
    loaded = sorted(
        name
        for name in names
        if any(name == banned or name.startswith(f"{banned}.") for banned in NOT_FOR_STATS)
    )
    assert loaded == []
