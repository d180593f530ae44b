"""Where a job's time went, read back from a scratch database after a run.

The database's own clock stamps every job (``started_at``, ``finished_at``) and the worker's
client times every MCP call (``job_events``): a bench's figures come from there, not from
clocks of its own in another process.
"""

from __future__ import annotations

from typing import Any

import psycopg


def job_timeline(conn: psycopg.Connection[Any]) -> tuple[list[float], list[float]]:
    """Claim to commit of every job, and each worker process's gaps between its jobs (the
    worker of an attempt is in its "running" event)."""
    rows = conn.execute(
        "SELECT e.detail->>'worker', extract(epoch FROM j.started_at)::float8,"
        " extract(epoch FROM j.finished_at)::float8"
        " FROM jobs j JOIN job_events e ON e.job_id = j.id AND e.to_state = 'running'"
        " WHERE j.state = 'succeeded' ORDER BY 1, 2"
    ).fetchall()
    in_job, between = [], []
    for n, (worker, started, finished) in enumerate(rows):
        in_job.append((finished - started) * 1000)
        if n and rows[n - 1][0] == worker:
            between.append((started - rows[n - 1][2]) * 1000)
    return in_job, between


def calls_per_job_ms(conn: psycopg.Connection[Any]) -> list[float]:
    """Each succeeded job's MCP calls, summed as the worker's client timed them: the part of
    its claim-to-commit that the server's answers took."""
    rows = conn.execute(
        "SELECT coalesce(sum(e.duration_ms), 0) FROM jobs j"
        " LEFT JOIN job_events e ON e.job_id = j.id AND e.kind = 'mcp_call'"
        " WHERE j.state = 'succeeded' GROUP BY j.id"
    ).fetchall()
    return [float(total) for (total,) in rows]
