"""Starting a worker or beat in this process: what ``doclane worker`` and ``doclane beat`` run."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from pipeline.queues import CONTROL_QUEUE
from pipeline.settings.tree import read_settings
from pipeline.support.logs import configure_logging
from workers.app import create_app
from workers.heartbeat import Heartbeat
from workers.runtime import preload
from workers.timer_sweep import TimerSweep


def run_worker(
    *,
    queues: Sequence[str] | None = None,
    concurrency: int | None = None,
    beat: bool | None = None,
    loglevel: str | None = None,
) -> int:
    """Run a Celery worker until it is told to stop (SIGTERM: warm shutdown, running jobs end).

    Returns the worker's exit code.
    """
    tree = read_settings()
    settings = tree.worker
    app = create_app(tree)
    app.steps["worker"].add(Heartbeat)
    app.steps["worker"].add(TimerSweep)
    wanted = list(queues or settings.worker_queues)
    embed_beat = settings.worker_beat if beat is None else beat
    if embed_beat and CONTROL_QUEUE not in wanted:
        wanted.append(CONTROL_QUEUE)
    log_settings = tree.logs
    worker = app.Worker(
        hostname=f"doclane-{os.getpid()}@{socket.gethostname()}",
        queues=wanted,
        concurrency=concurrency or settings.worker_concurrency,
        pool_cls="prefork",
        beat=embed_beat,
        loglevel=loglevel or log_settings.level,
        # A JSON log stream stays JSON: no banner on stdout.
        quiet=log_settings.format == "json",
        without_mingle=True,
        without_gossip=True,
        optimization="fair",
    )
    preload()  # before the pool forks: each process finds the modules imported
    worker.start()
    return int(worker.exitcode or 0)


def run_beat(*, loglevel: str | None = None) -> None:
    """Run beat alone (the reconciler's clock) for fleets that do not embed it in workers."""
    tree = read_settings()
    configure_logging(tree.logs)
    app = create_app(tree)
    app.Beat(loglevel=loglevel or tree.logs.level).run()
