"""``doclane worker`` as a bench runs it, and waiting for its jobs to end.

Two waits, because benches ask two questions: :func:`wait_finished` (every job has ended, in
whatever state: the bench reads the outcomes afterwards) and :func:`wait_succeeded` (every job
succeeded: one failure ends the bench, since its figures would measure a different thing).
Both poll the scratch database with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import psycopg

from bench.harness.paths import DOCLANE
from tests.support.brokers import Broker


def worker_env(db_url: str, broker: Broker, origin: str, **settings: str) -> dict[str, str]:
    """The environment of a bench's ``doclane worker`` and ``doclane submit``: a scratch
    database and broker, ``origin`` (one, or several comma-separated), the docling-mcp profile,
    batches and rounds off (a job at a time) and INFO logs (``wait_ready`` reads the "ready."
    line) unless ``settings`` (``DOCLANE_*`` names) say otherwise."""
    return {
        **os.environ,
        "DOCLANE_DATABASE_URL": db_url,
        "DOCLANE_BROKER_URL": broker.url,
        "DOCLANE_REDIS_URL": broker.url,
        "DOCLING_MCP_ORIGIN": origin,
        "DOCLANE_BATCH_MAX_DOCS": "1",
        "DOCLANE_ROUND_MAX_DOCS": "1",
        "DOCLANE_PROFILE": "docling-mcp",
        "DOCLANE_LOG_LEVEL": "INFO",
        **settings,
    }


def start_worker(env: Mapping[str, str], log_path: Path, *args: str) -> subprocess.Popen[bytes]:
    """Migrate the scratch database, start ``doclane worker <args>`` (its own process group,
    logging to ``log_path``) and wait until it is ready; the caller stops it (``stop_worker``)."""
    subprocess.run([DOCLANE, "db", "migrate"], env=env, check=True, capture_output=True)
    with open(log_path, "wb") as logfile:
        worker = subprocess.Popen(
            [DOCLANE, "worker", *args],
            env=env,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(worker, log_path)
    except BaseException:
        stop_worker(worker)
        raise
    return worker


def wait_ready(worker: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 90
    while b" ready." not in log_path.read_bytes():
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited before it was ready (log: {log_path})")
        if time.monotonic() > deadline:
            raise SystemExit(f"the worker was not ready within 90 s (log: {log_path})")
        time.sleep(0.2)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Celery's warm shutdown), then the whole process group if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()


def wait_finished(db_url: str, count: int, *, timeout: float) -> None:
    """Until ``count`` jobs have ended (``finished_at`` set, whatever their state)."""
    query = "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL"

    def ended(row: tuple[int, ...]) -> int:
        return int(row[0])

    _poll_jobs(db_url, query, ended, count, timeout)


def wait_succeeded(db_url: str, count: int, *, timeout: float) -> None:
    """Until ``count`` jobs have succeeded; a failed or cancelled job ends the bench at once."""
    query = (
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " count(*) FILTER (WHERE state IN ('failed', 'cancelled')) FROM jobs"
    )

    def succeeded(row: tuple[int, ...]) -> int:
        if row[1]:
            raise SystemExit(f"{row[1]} job(s) failed")
        return int(row[0])

    _poll_jobs(db_url, query, succeeded, count, timeout)


def _poll_jobs(
    db_url: str, query: str, done: Callable[[tuple[int, ...]], int], count: int, timeout: float
) -> None:
    """Run ``query`` every 0.2 s until ``done(row)`` reaches ``count``, or the deadline."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(db_url, autocommit=True) as conn:
        while True:
            row = conn.execute(query).fetchone()
            assert row is not None
            reached = done(row)
            if reached >= count:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"only {reached} of {count} jobs finished within {timeout:.0f} s")
            time.sleep(0.2)
