"""Reading jobs, their trail and their results: what status, lists and counts show.

What the CLI, the API, the console and the admin views read (the admin views' own sums are
:class:`~pipeline.store.admin.AdminStore`'s). Nothing here writes.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from datetime import datetime
from typing import BinaryIO
from uuid import UUID

from errors import ResultsExpired
from pipeline.jobs.model import Job, JobEvent, JobState, ResultInfo
from pipeline.store.ids import IdRange, id_range, one_of
from pipeline.store.large_values import copy_single_value
from pipeline.store.pool import OnPool
from pipeline.store.queries import query
from pipeline.store.rows import counts_by_state


class Reads(OnPool):
    """Jobs, their events and results, and counts, read through ``pool``."""

    # ---- ids ---------------------------------------------------------------------------------
    def job_id(self, text: str, *, tenant: str | None = None) -> UUID:
        """The job id ``text`` names: the id, or a unique prefix of it (:mod:`.ids`), among
        ``tenant``'s jobs when given. ``ValueError`` when it is no id; E108 when no job's id
        starts so, E121 when more than one's does."""
        asked = id_range(text)
        if asked.whole is not None:
            return asked.whole
        return one_of(self._by_prefix("job_ids_by_prefix", asked, tenant), asked, "job")

    def submission_id(self, text: str, *, tenant: str | None = None) -> UUID:
        """The submission id ``text`` names, as :meth:`job_id` (E108: no submission's id)."""
        asked = id_range(text, "submission")
        if asked.whole is not None:
            return asked.whole
        found = self._by_prefix("submission_ids_by_prefix", asked, tenant)
        return one_of(found, asked, "submission")

    def _by_prefix(self, name: str, asked: IdRange, tenant: str | None) -> list[tuple[UUID, int]]:
        params = {"low": asked.low, "high": asked.high, "tenant": tenant}
        with self.pool.connection("resolving a short id") as conn:
            return [(row[0], row[1]) for row in conn.execute(query(name), params)]

    def get_job(self, job_id: UUID) -> Job | None:
        return self.pool.fetch_job("reading a job", query("get_job"), {"job_id": job_id})

    def get_jobs(self, job_ids: Iterable[UUID]) -> list[Job]:
        """The jobs that exist among ``job_ids``, in the order asked."""
        ids = list(job_ids)
        rows = self.pool.fetch_rows("reading jobs", query("get_jobs"), {"job_ids": ids})
        by_id = {row["id"]: Job.model_validate(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def slices(self, job_id: UUID) -> list[Job]:
        """The slices a job was split into, in page order (none for a whole document)."""
        rows = self.pool.fetch_rows("reading slices", query("get_slices"), {"job_id": job_id})
        return [Job.model_validate(row) for row in rows]

    def finished_among(self, job_ids: Iterable[UUID]) -> dict[UUID, JobState]:
        """Those of ``job_ids`` that have finished, with their state (cheap enough to poll)."""
        params = {"job_ids": list(job_ids)}
        with self.pool.connection("reading job states") as conn:
            rows = conn.execute(query("finished_among"), params)
            return {row[0]: JobState(row[1]) for row in rows}

    def events(self, job_id: UUID) -> list[JobEvent]:
        rows = self.pool.fetch_rows("reading events", query("job_events"), {"job_id": job_id})
        return [JobEvent.model_validate(row) for row in rows]

    def list_results(self, job_id: UUID) -> list[ResultInfo]:
        rows = self.pool.fetch_rows("listing results", query("list_results"), {"job_id": job_id})
        return [ResultInfo.model_validate(row) for row in rows]

    def get_result(self, job_id: UUID, fmt: str) -> str | None:
        """One result's content as a ``str`` (from PostgreSQL: one copy in memory besides the
        driver's buffer); ``None`` when there is no such result, E113 when it expired."""
        params = {"job_id": job_id, "format": fmt}
        with self.pool.connection("reading a result") as conn:
            row = conn.execute(query("result_location"), params).fetchone()
            if row is not None and row[0] is None:
                content = conn.execute(query("get_result"), params).fetchone()
                return content[0] if content else None
        if row is None:
            self.check_not_expired(job_id, fmt)
            return None
        out = io.BytesIO()
        self.pool.objects_for(row[0]).write(row[0], out)
        return out.getvalue().decode()

    def write_result(self, job_id: UUID, fmt: str, out: BinaryIO) -> int | None:
        """Write one result's UTF-8 bytes to ``out`` without decoding it into a ``str``, from
        wherever it is kept: PostgreSQL's (binary COPY, from the driver's buffer to ``out``)
        or the object store's (streamed). Bytes written; ``None`` when there is no such result;
        :class:`errors.ResultsExpired` (E113) when the retention sweep deleted it."""
        params = {"job_id": job_id, "format": fmt}
        with self.pool.connection("reading a result") as conn:
            row = conn.execute(query("result_location"), params).fetchone()
            if row is None:
                self.check_not_expired(job_id, fmt)
                return None
            if row[0] is None:
                with conn.cursor() as cur, cur.copy(query("copy_result_out"), params) as copy:
                    return copy_single_value(copy, out)
        return self.pool.objects_for(row[0]).write(row[0], out)

    def check_not_expired(self, job_id: UUID, fmt: str | None = None) -> None:
        """E113 when the retention sweep deleted this job's results (``fmt``: that one)."""
        rows = self.pool.fetch_rows("reading a result", query("result_expiry"), {"job_id": job_id})
        if rows and (fmt is None or fmt in rows[0]["formats"]):
            at = rows[0]["expired_at"]
            raise ResultsExpired(
                f"job {job_id}: its results expired on {at:%Y-%m-%d %H:%M} UTC "
                "(DOCLANE_RESULT_RETENTION) and were deleted",
                detail={"job_id": str(job_id), "expired_at": at.isoformat()},
            )

    # ---- counts ----------------------------------------------------------------------------------
    def count_in_flight(self, tenant: str | None = None) -> dict[JobState, int]:
        """Queued, waiting, running and retrying jobs right now (of ``tenant`` alone, when
        given); cheap at any table size."""
        params = {"tenant": tenant}
        rows = self.pool.fetch_rows("counting jobs", query("count_in_flight"), params)
        return counts_by_state(rows, [s for s in JobState if not s.terminal])

    def backlog(self) -> dict[tuple[str, str], int]:
        """Queued jobs by (queue, tenant), from the lanes' counts: the backlog the workers
        scale on (the broker holds only a few bells, which say nothing of the work)."""
        rows = self.pool.fetch_rows("reading the backlog", query("backlog"), {})
        return {(row["queue"], row["tenant"]): int(row["queued"]) for row in rows}

    def failures_by_error_code(self, since: datetime) -> dict[str, int]:
        rows = self.pool.fetch_rows(
            "counting failures", query("failures_by_error_code"), {"since": since}
        )
        return {r["error_code"]: r["jobs"] for r in rows}
