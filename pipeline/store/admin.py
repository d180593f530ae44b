"""What admins read: totals, throughput, percentiles, the MCP call trail in sums, job lists.

``AdminStore`` is the reading side of ``doclane stats``, ``doclane jobs`` and ``/metrics``, on
the process's :class:`~pipeline.store.pool.StorePool` (a
:class:`~pipeline.store.store.JobStore` has one as its ``admin``). Each query is made to stay
cheap at a million jobs (``bench/admin_queries.py`` proves it): all-time sums come from the
rollups of migration 0007 plus the rows after their mark, which the first reader after the marks
grew stale moves into the rollups (one reader at a time; the others do not wait for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from pipeline.jobs.model import TERMINAL_STATES, Job, JobState
from pipeline.queues import MEDIUM_BELOW_BYTES, SMALL_BELOW_BYTES
from pipeline.store.pool import OnPool
from pipeline.store.queries import query
from pipeline.store.rows import counts_by_state

#: Rows newer than this are never rolled up: their transaction may not have committed yet.
ROLLUP_MARGIN_S = 15 * 60
#: Marks older than this are moved forward by the next reader, so a reader counts at most this
#: much recent history row by row.
ROLLUP_STALE_S = 30 * 60


@dataclass(frozen=True, slots=True)
class FinishedTotal:
    state: JobState
    error_code: str | None
    jobs: int


@dataclass(frozen=True, slots=True)
class EventTotal:
    """All-time sum of one kind of event: a state entered, or MCP calls of one tool, outcome and
    latency bucket (``bucket`` indexes :meth:`AdminStore.mcp_duration_bounds`, 1-based)."""

    kind: str
    name: str
    outcome: str
    bucket: int
    events: int
    duration_ms_sum: float


@dataclass(frozen=True, slots=True)
class ThroughputRow:
    minutes_ago: int
    state: JobState
    last_1m: int
    last_5m: int
    last_60m: int


@dataclass(frozen=True, slots=True)
class Percentiles:
    tier: str
    jobs: int
    p50_s: float
    p95_s: float


@dataclass(frozen=True, slots=True)
class JobFilter:
    """``doclane jobs`` / ``GET /v1/jobs`` / the console: every filter optional, newest first.

    ``before`` is a keyset cursor, the (``created_at``, ``id``) of the last job of the previous
    page: the next page starts right after it, an index range scan however deep it is (an
    OFFSET would read and drop every row before it)."""

    state: JobState | None = None
    error_code: str | None = None
    queue: str | None = None
    since: datetime | None = None
    #: The jobs of one submission (the id ``doclane submit`` prints).
    submission: UUID | None = None
    #: The jobs of one tenant (jobs_tenant_created_idx).
    tenant: str | None = None
    limit: int = 50
    until: datetime | None = None
    before: tuple[datetime, UUID] | None = None


class AdminStore(OnPool):
    """The admin views' reads, through ``pool``."""

    def roll_up(self) -> bool:
        """Move the rollup marks forward if they are stale; False when there was nothing to do
        or another reader is doing it right now."""
        params = {"margin_s": float(ROLLUP_MARGIN_S), "stale_s": float(ROLLUP_STALE_S)}
        with self.pool.connection("rolling up totals") as conn, conn.transaction():
            marks = conn.execute(query("take_rollup_marks"), params).fetchone()
            if marks is None:
                return False
            finished_before, events_before, until = marks
            conn.execute(query("roll_up_finished"), {"since": finished_before, "until": until})
            conn.execute(query("roll_up_events"), {"since": events_before, "until": until})
            conn.execute(query("set_rollup_marks"), {"until": until})
        return True

    def finished_totals(self) -> list[FinishedTotal]:
        """All-time succeeded, failed and cancelled jobs, by error code."""
        rows = self.pool.fetch_rows(
            "counting finished jobs", query("finished_totals"), self._marks()
        )
        return [
            FinishedTotal(JobState(r["state"]), r["error_code"] or None, int(r["jobs"]))
            for r in rows
        ]

    def event_totals(self) -> list[EventTotal]:
        """All-time state changes and MCP calls, summed (for Prometheus counters)."""
        rows = self.pool.fetch_rows("summing the job trail", query("event_totals"), self._marks())
        return [
            EventTotal(
                kind=r["kind"],
                name=r["name"] or "",
                outcome=r["outcome"],
                bucket=int(r["bucket"]),
                events=int(r["events"]),
                duration_ms_sum=float(r["duration_ms_sum"]),
            )
            for r in rows
        ]

    def _marks(self) -> dict[str, Any]:
        """Roll up if due, then the marks the totals add the recent rows from."""
        self.roll_up()
        [marks] = self.pool.fetch_rows("reading the rollup marks", query("rollup_marks"), {})
        return marks

    def mcp_duration_bounds(self) -> list[float]:
        """The latency histogram's bucket bounds in milliseconds (fixed by migration 0007)."""
        rows = self.pool.fetch_rows("reading histogram bounds", query("mcp_duration_bounds"), {})
        return [float(b) for b in rows[0]["bounds"]]

    def throughput(self) -> list[ThroughputRow]:
        """Jobs finished over the last hour, by minute and state, with 1/5/60-minute counts."""
        rows = self.pool.fetch_rows("measuring throughput", query("throughput"), {})
        return [
            ThroughputRow(
                int(r["minutes_ago"]),
                JobState(r["state"]),
                int(r["last_1m"]),
                int(r["last_5m"]),
                int(r["last_60m"]),
            )
            for r in rows
        ]

    def batch_sizes(self, since: datetime) -> tuple[int, int, int]:
        """(batches, documents in them, the largest) of the batches noted since ``since``."""
        rows = self.pool.fetch_rows("measuring batches", query("batch_sizes"), {"since": since})
        row = rows[0] if rows else {}
        return (
            int(row.get("batches") or 0),
            int(row.get("documents") or 0),
            int(row.get("largest") or 0),
        )

    def conversion_percentiles(self, window_s: float) -> list[Percentiles]:
        """p50/p95 seconds from first claim to success, by size tier, over ``window_s``."""
        params = {
            "window_s": float(window_s),
            "small_below": SMALL_BELOW_BYTES,
            "medium_below": MEDIUM_BELOW_BYTES,
        }
        sql = query("conversion_percentiles")
        rows = self.pool.fetch_rows("measuring conversion times", sql, params)
        return [
            Percentiles(r["tier"], int(r["jobs"]), float(r["p50_s"]), float(r["p95_s"]))
            for r in rows
        ]

    def list_jobs(self, filters: JobFilter) -> list[Job]:
        """Newest jobs matching every given filter. Sent unprepared (see ``list_jobs`` in
        admin.sql): a generic plan could not drop the unused filters and pick the index."""
        params = list_jobs_params(filters)
        with self.pool.connection("listing jobs") as conn:
            cur = conn.cursor(row_factory=dict_row)
            rows = cur.execute(query("list_jobs"), params, prepare=False).fetchall()
        return [Job.model_validate(row) for row in rows]

    # ---- whole-table counts and one-filter lists ----------------------------------------------
    # Not what the dashboards read (finished_totals and list_jobs stay cheap at any size); kept
    # for checks by hand and tests, and measured beside the others by bench/store_admin_queries.py.
    def count_finished_since(self, since: datetime) -> dict[JobState, int]:
        """Succeeded, failed and cancelled jobs that finished at or after ``since``."""
        rows = self.pool.fetch_rows(
            "counting jobs", query("count_finished_since"), {"since": since}
        )
        return counts_by_state(rows, sorted(TERMINAL_STATES))

    def oldest_queued(self) -> dict[str, float]:
        """Seconds since the oldest queued job of each queue was created (queues with none
        waiting are absent)."""
        rows = self.pool.fetch_rows("finding the oldest queued jobs", query("oldest_queued"), {})
        return {r["queue"]: float(r["age_s"]) for r in rows}

    def count_by_state(self) -> dict[JobState, int]:
        """All-time totals of every state. This reads the whole table (about 0.14 s per
        million jobs); dashboards want :meth:`Reads.count_in_flight` and :meth:`finished_totals`."""
        rows = self.pool.fetch_rows("counting jobs", query("count_by_state"), {})
        return counts_by_state(rows, list(JobState))

    def recent_jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | None = None,
        error_code: str | None = None,
        limit: int = 50,
    ) -> list[Job]:
        """Newest jobs, optionally of one queue, one state or one error code (one filter: each
        has its own index)."""
        filters = {"queue": queue, "state": state, "error_code": error_code}
        given = {name: str(value) for name, value in filters.items() if value is not None}
        if len(given) > 1:
            raise ValueError("recent_jobs() takes at most one of queue, state, error_code")
        name = {
            "queue": "recent_jobs_of_queue",
            "state": "recent_jobs_in_state",
            "error_code": "recent_jobs_with_error",
        }.get(next(iter(given), ""), "recent_jobs")
        params: dict[str, Any] = {"limit": limit, **given}
        rows = self.pool.fetch_rows("listing jobs", query(name), params)
        return [Job.model_validate(row) for row in rows]


def list_jobs_params(filters: JobFilter) -> dict[str, Any]:
    """The parameters of ``list_jobs`` (admin.sql) for ``filters``: every one named, unused
    ones None, so the bench that explains the query binds what the store binds."""
    return {
        "state": filters.state.value if filters.state else None,
        "error_code": filters.error_code,
        "queue": filters.queue,
        "since": filters.since,
        "until": filters.until,
        "before_at": filters.before[0] if filters.before else None,
        "before_id": filters.before[1] if filters.before else None,
        "submission": filters.submission,
        "tenant": filters.tenant,
        "limit": filters.limit,
    }
