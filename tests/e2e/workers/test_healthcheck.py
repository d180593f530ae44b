"""compose.yaml's health checks (and Flower's app), against a real worker and broker.

``python -m workers.healthcheck worker`` must say healthy exactly while this host's worker
answers through the broker, and ``beat`` exactly while the broker accepts connections: these
decide when compose restarts a container and when its dependants start.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from tests.fixtures.brokers import Broker
from tests.fixtures.workers import Cluster

#: No conversion happens here: the workers never reach this (closed) port.
NO_SERVER = "http://127.0.0.1:9/mcp"


def healthcheck(env: dict[str, str], what: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.healthcheck", what],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_worker_is_healthy_while_its_node_answers_and_not_after(
    make_cluster: Callable[..., Cluster], redis_broker: Broker
) -> None:
    cluster = make_cluster(redis_broker, NO_SERVER)
    before = healthcheck(cluster.env, "worker")
    assert before.returncode == 1, before.stderr

    worker = cluster.start_worker(concurrency=1, beat=False)
    alive = healthcheck(cluster.env, "worker")
    assert alive.returncode == 0, alive.stderr + cluster.logs()
    assert f"doclane-{worker.pid}@" in alive.stderr
    # Celery's own tools (Flower in compose.yaml) reach it through workers.monitor's app.
    inspect = subprocess.run(
        [sys.executable, "-m", "celery", "--app", "workers.monitor", "inspect", "ping"],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert inspect.returncode == 0 and f"doclane-{worker.pid}@" in inspect.stdout, inspect
    # Both went through doclane's own transport options: the worker could parse them.
    assert "Control command error" not in worker.log()

    worker.stop()
    after = healthcheck(cluster.env, "worker")
    assert after.returncode == 1, after.stderr


def test_beat_is_healthy_while_the_broker_accepts_connections(
    make_cluster: Callable[..., Cluster], redis_broker: Broker
) -> None:
    cluster = make_cluster(redis_broker, NO_SERVER)
    assert healthcheck(cluster.env, "beat").returncode == 0
    down = {**cluster.env, "DOCLANE_BROKER_URL": "redis://127.0.0.1:9/0"}
    result = healthcheck(down, "beat")
    assert result.returncode == 1
    assert "broker unreachable" in result.stderr


def test_healthcheck_refuses_an_unknown_role() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workers.healthcheck", "flower"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "usage" in result.stderr
