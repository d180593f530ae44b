"""Live workers as doclane stats tells them: from the nodes' own heartbeats, not an inspect
broadcast. A worker is seen once it is ready, leaves at once when it stops in order, and leaves
three beats after it is killed outright. The queue depths come with the beats, counted by a
node."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster


def _workers(cluster: Cluster) -> list[dict[str, Any]]:
    stats = cluster.cli_json("stats", check=False)
    assert "workers" not in stats["unreachable"], stats["unreachable"]
    workers: list[dict[str, Any]] = stats["workers"]
    return workers


def test_stats_sees_workers_by_their_heartbeats(
    make_cluster: Callable[..., Cluster], any_broker: Broker, fake_server: FakeServer
) -> None:
    cluster = make_cluster(any_broker, fake_server.url, DOCLANE_WORKER_HEARTBEAT_S="0.5")
    first = cluster.start_worker(concurrency=2, beat=False)
    second = cluster.start_worker(concurrency=1, beat=False)
    names = {f"doclane-{first.pid}@", f"doclane-{second.pid}@"}

    seen = wait_for(lambda: len(w := _workers(cluster)) == 2 and w, message="both workers seen")
    assert {w["name"].split("@")[0] + "@" for w in seen} == names
    by_concurrency = sorted((w["concurrency"], w["tasks_done"]) for w in seen)
    assert by_concurrency == [(1, 0), (2, 0)]
    assert all("doclane.small" in w["queues"] for w in seen)
    counters = wait_for(lambda: _counters(cluster), message="queue depths counted by a node")
    assert len(counters) == 1 and counters <= {w["name"] for w in seen}, counters

    submission = cluster.submit([_sample(cluster)])
    cluster.wait_terminal(submission.job_ids)
    wait_for(
        lambda: sum(w["tasks_done"] for w in _workers(cluster)) >= 1,
        message="a task counted in a heartbeat",
    )

    second.stop()  # warm shutdown: its key goes with it, no wait for the expiry
    assert [w["name"] for w in _workers(cluster)] == [w["name"] for w in seen if
                                                      w["concurrency"] == 2]  # fmt: skip

    os.killpg(first.pid, signal.SIGKILL)  # no shutdown at all: gone three beats later
    first.popen.wait(timeout=30)
    wait_for(lambda: _workers(cluster) == [], timeout=30, message="the killed worker expired")


def _counters(cluster: Cluster) -> set[str] | None:
    """The nodes whose count of the bells stats shows; None while it asked the broker itself."""
    found = {q["counted_by"] for q in cluster.cli_json("stats", check=False)["bells"]}
    return None if None in found else found


def _sample(cluster: Cluster) -> str:
    path = cluster.workdir / "heartbeat.md"
    path.write_text("# counted\n")
    return str(path)
