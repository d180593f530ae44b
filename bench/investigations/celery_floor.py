"""What Celery alone costs per task, configured as doclane's workers are (the pipeline figure).

A task that does nothing but note the time in Redis, on a Celery app with the broker options of
``workers/app.py`` (Redis without acknowledgement emulation, ten priority levels per queue,
the three job queues and the control queue, late acknowledgement, one message per process,
the fair scheduler) and none of doclane's process set-up; a prefork worker started as
``doclane worker`` starts its own. Messages are published first, then the worker is started;
the figure is the time per task from the 100th task's start to the last one's: Celery's
hand-off (result to the main process, the next message from Redis, down the pipe to a pool
process) plus a Redis write. doclane's own gap between one job's commit and the next claim is in
``bench/pipeline_overhead.py``'s *between* column; this is the part of it that is Celery's.

    .venv/bin/python -m bench.investigations.celery_floor
        [--tasks 3000] [--concurrency 1,2,4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from pipeline.queues import CONTROL_QUEUE, JOB_QUEUES
from workers.broker import MAX_BROKER_PRIORITY

STAMPS = "doclane-bench:celery-floor:stamps"


def build_app(broker_url: str) -> Any:
    """A Celery app with doclane's broker and task options and one task that notes the time."""
    import redis
    from celery import Celery
    from kombu.entity import Exchange, Queue

    app = Celery("doclane-floor", set_as_current=False)
    app.conf.update(
        broker_url=broker_url,
        broker_transport_options={
            "priority_steps": list(range(MAX_BROKER_PRIORITY + 1)),
            "sep": ":",
            "queue_order_strategy": "round_robin",
            "ack_emulation": False,
        },
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_queues=[
            Queue(name, Exchange(""), routing_key=name) for name in [*JOB_QUEUES, CONTROL_QUEUE]
        ],
        task_default_queue="doclane.small",
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    stamps = redis.Redis.from_url(broker_url)

    @app.task(name="doclane.bench.noted", shared=False, acks_late=True, ignore_result=True)
    def noted(n: int) -> None:
        stamps.rpush(STAMPS, repr(time.time()))

    return app


def run_worker(broker_url: str, concurrency: int) -> None:
    """The worker as ``workers/main.py`` starts doclane's (no beat, warnings only)."""
    app = build_app(broker_url)
    worker = app.Worker(
        hostname=f"floor-{os.getpid()}@bench",
        queues=[*JOB_QUEUES, CONTROL_QUEUE],
        concurrency=concurrency,
        pool_cls="prefork",
        beat=False,
        loglevel="WARNING",
        quiet=True,
        without_mingle=True,
        without_gossip=True,
        optimization="fair",
    )
    worker.start()


def one_run(broker: Any, concurrency: int, tasks: int) -> float:
    """Milliseconds per task at ``concurrency`` pool processes."""
    import redis

    broker_url = broker.url
    broker.flush()  # the claim stays
    client = redis.Redis.from_url(broker_url)
    app = build_app(broker_url)
    for n in range(tasks):
        app.send_task("doclane.bench.noted", args=[n], queue="doclane.small", priority=0)
    # The worker is this module too, found as this process was (python -m, the same sys.path).
    command = [
        sys.executable,
        "-m",
        "bench.investigations.celery_floor",
        "--worker",
        "--broker",
        broker_url,
    ]
    worker = subprocess.Popen(
        [*command, "-c", str(concurrency)],
        start_new_session=True,
        stdout=sys.stderr,  # stdout is the report's
    )
    try:
        deadline = time.monotonic() + 300
        while client.llen(STAMPS) < tasks:
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the worker stopped or stalled at {client.llen(STAMPS)} tasks")
            time.sleep(0.05)  # polling a count for the end of a run, not a synchronisation
        times = sorted(float(t) for t in client.lrange(STAMPS, 0, -1))
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        client.close()
    skip = min(100, tasks // 4)
    return (times[-1] - times[skip]) / (len(times) - 1 - skip) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="Tiny counts (CI).")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--broker", help=argparse.SUPPRESS)
    parser.add_argument("-c", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args.broker, args.c)
        return
    if args.smoke:
        args.tasks, args.concurrency, args.rounds = 40, "1", 1

    from bench.harness import claim_redis_db

    broker = claim_redis_db()
    levels = [int(c) for c in args.concurrency.split(",")]
    runs: dict[int, list[float]] = {c: [] for c in levels}
    try:
        for _ in range(args.rounds):
            for c in levels:
                runs[c].append(round(one_run(broker, c, args.tasks), 4))
                print(f"-c {c}: {runs[c][-1]:.3f} ms per task", file=sys.stderr)
    finally:
        broker.release()
    medians = {str(c): statistics.median(values) for c, values in runs.items()}
    for level, ms in medians.items():
        print(f"-c {level}: median {ms:.3f} ms per task ({1000 / ms:.0f} tasks/s)", file=sys.stderr)
    if args.json:
        out = {"tasks": args.tasks, "ms_per_task": medians, "runs": runs}
        print(json.dumps({**out, "runs": {str(c): v for c, v in runs.items()}}))


if __name__ == "__main__":
    main()
