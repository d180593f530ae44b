"""A worker's attempt: its claim, its progress, and its end, each fenced on the attempt.

What ``pipeline.processing`` writes, and nothing else. Every write after a claim is guarded by
``(job_id, attempt, state = 'running')``: a stale or duplicate worker matches no row, writes
nothing, and gets ``False``/``None`` back. Claims and ends wait for the disk; a running
attempt's progress (stages, calls, notes, lease renewals) does not (:meth:`StorePool.progress`;
a stage and a renewal are functions of one statement that say so themselves).
The two writes every job makes, a stage with its calls and the successful end with its
results, are one statement each (migration 0009's functions). Results are written by the one
:class:`~pipeline.store.finishing.ResultWriter`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from errors import PipelineError
from pipeline.jobs.model import Job, JobState, Stage
from pipeline.store.finishing import ResultWriter, insert_calls
from pipeline.store.pool import OnPool, StorePool
from pipeline.store.queries import query
from pipeline.store.rows import AttemptResults, CallEvent, calls_json, error_columns, jsonb


def _round_params(
    lead: Job, worker: str, lease_s: float, *, limit: int, small_below: int
) -> dict[str, Any]:
    """Up to ``limit`` small due jobs like ``lead`` (its queue, profile, options and formats),
    claimed by ``worker``: what a round's and a batch's claims both ask (sql/rounds.sql,
    sql/batches.sql)."""
    return {
        "queue": lead.queue,
        "profile": lead.profile,
        "options": jsonb(lead.options),
        "formats": list(lead.formats),
        "small_below": small_below,
        "limit": limit,
        "worker": worker,
        "lease_s": float(lease_s),
    }


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What may share one call to the server's directory tool (migration 0026's p_batch)."""

    #: The most bytes a batch's documents add up to.
    max_bytes: int
    #: Suffixes of tables (``.csv``), whose Docling JSON explodes: larger ones go alone.
    table_suffixes: frozenset[str]
    table_max_bytes: int

    def for_claim(self, lead: Job) -> dict[str, Any]:
        """The batch's rules with ``lead`` its first member: its tenant, name, content, size."""
        return {
            "tenant": lead.tenant,
            "names": [PurePath(lead.source_uri).name],
            "contents": [lead.content_sha256] if lead.content_sha256 else [],
            "bytes": lead.size_bytes or 0,
            "max_bytes": self.max_bytes,
            "table_suffixes": sorted(self.table_suffixes),
            "table_max_bytes": self.table_max_bytes,
        }

    def admits(self, source_uri: str, size_bytes: int) -> bool:
        """Whether a document's proof is cheap enough for it to share a call (the claim applies
        the same rule to companions)."""
        suffix = PurePath(source_uri).suffix.lower()
        return suffix not in self.table_suffixes or size_bytes <= self.table_max_bytes


class ClaimFound(StrEnum):
    """What a claim found (migration 0021's ``claim_found``)."""

    #: Jobs, claimed.
    CLAIMED = "claimed"
    #: No queued or due job in the queue.
    EMPTY = "empty"
    #: Queued jobs, none it may take: their tenants paused or at their running cap.
    CAPPED = "capped"


@dataclass(frozen=True, slots=True)
class QueueClaim:
    """What a drain's claim took (:meth:`Attempts.claim_queue`)."""

    found: ClaimFound
    #: The lead, the fair order's next job; None when nothing was claimed.
    lead: Job | None
    #: Jobs like the lead claimed with it (a round's or a batch's), by priority then age.
    companions: list[Job]


def _in_round_order(rows: Iterable[dict[str, Any]]) -> list[Job]:
    jobs = [Job.model_validate(row) for row in rows]
    return sorted(jobs, key=lambda job: (-job.priority, job.created_at))


class Attempts(OnPool):
    """The writes of workers' attempts, through ``pool``."""

    def __init__(self, pool: StorePool) -> None:
        super().__init__(pool)
        self.result_writer = ResultWriter(pool)

    # ---- claims and waits ------------------------------------------------------------------------
    def claim(self, job_id: UUID, worker: str, lease_s: float) -> Job | None:
        """Start a new attempt: queued|retrying -> running with ``attempt + 1`` and a lease.

        ``None`` when the job is running elsewhere, finished or cancelled: nothing to do.
        """
        params = {"job_id": job_id, "worker": worker, "lease_s": float(lease_s)}
        return self.pool.fetch_job("claiming a job", query("claim_job"), params)

    def claim_queue(
        self, queue: str, worker: str, lease_s: float, *, limit: int = 1, small_below: int = 0
    ) -> QueueClaim:
        """The one claim (sql/jobs.sql ``claim_queue``): ``queue``'s due retries staged, then
        the fair order's next job and, with ``limit`` > 1, up to ``limit - 1`` companions like
        it (a never-tried small file job's). One statement, one round trip; what it found is
        in its rows."""
        params = {
            "queue": queue,
            "worker": worker,
            "lease_s": float(lease_s),
            "limit": limit,
            "small_below": small_below,
        }
        rows = self.pool.fetch_rows("claiming a job", query("claim_queue"), params)
        found = ClaimFound(rows[0]["found"]) if rows else ClaimFound.EMPTY
        jobs = [Job.model_validate(row) for row in rows if row["id"] is not None]
        return QueueClaim(found, jobs[0] if jobs else None, jobs[1:])

    def claim_companions(
        self,
        lead: Job,
        worker: str,
        lease_s: float,
        *,
        limit: int,
        small_below: int,
        batch: BatchLimits,
    ) -> list[Job]:
        """Claim up to ``limit`` due jobs that can share ``lead``'s batch, by the one claim
        (sql/batches.sql): its tenant's, within the tenant's running cap, that fit ``batch``;
        in fair order, each claimed as :meth:`claim` would."""
        params = {
            **_round_params(lead, worker, lease_s, limit=limit, small_below=small_below),
            "batch": jsonb(batch.for_claim(lead)),
        }
        rows = self.pool.fetch_rows("claiming a batch", query("claim_batch"), params)
        return [Job.model_validate(row) for row in rows]

    def claim_round(
        self, lead: Job, worker: str, lease_s: float, *, limit: int, small_below: int
    ) -> list[Job]:
        """Claim up to ``limit`` due jobs that can share ``lead``'s round, in one statement
        (sql/rounds.sql); each is claimed as :meth:`claim` claims one, in priority order."""
        params = _round_params(lead, worker, lease_s, limit=limit, small_below=small_below)
        rows = self.pool.fetch_rows("claiming a round", query("claim_round"), params)
        return _in_round_order(rows)

    def release(self, job_id: UUID, attempt: int, *, reason: str) -> bool:
        """Give a running job back to the queue, its attempt refunded (False: stale attempt)."""
        params = {"job_id": job_id, "attempt": attempt}
        with self.pool.because("releasing a job", reason) as conn:
            return conn.execute(query("release_job"), params).rowcount == 1

    # ---- progress --------------------------------------------------------------------------------
    def renew_lease(self, job_id: UUID, attempt: int, lease_s: float) -> bool:
        """Renew a running attempt's lease; ``False`` when the job is no longer its own."""
        params = {"job_id": job_id, "attempt": attempt, "lease_s": float(lease_s)}
        with self.pool.connection("renewing a lease") as conn:
            row = conn.execute(query("renew_lease"), params).fetchone()
        return bool(row and row[0])

    def set_stage(
        self,
        job_id: UUID,
        attempt: int,
        stage: Stage,
        *,
        origin: str | None = None,
        calls: Sequence[CallEvent] = (),
    ) -> bool:
        """Progress of a running attempt (and the server origin it talks to).

        ``calls`` made since the attempt's last write go to the trail in the same round trip,
        whether or not the attempt is still the job's, as :meth:`record_mcp_call` would write
        them.
        """
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "stage": stage.value,
            "origin": origin,
            "calls": calls_json(calls),
        }
        with self.pool.connection("recording a stage") as conn:
            row = conn.execute(query("record_progress"), params).fetchone()
        return bool(row and row[0])

    def record_source(
        self, job_id: UUID, attempt: int, *, size_bytes: int, content_sha256: str
    ) -> bool:
        """What a running attempt learnt about its source (a downloaded URL's size and hash)."""
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "size_bytes": size_bytes,
            "content_sha256": content_sha256,
        }
        return self.pool.update("recording a source", query("record_source"), params)

    def record_mcp_call(
        self,
        job_id: UUID,
        attempt: int,
        *,
        tool: str,
        duration_s: float,
        outcome: str,
        error_code: str | None = None,
        origin: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one MCP call to the job's trail (recorded even for a stale attempt: the call
        happened, and the trail is history, not state)."""
        call = CallEvent(tool, duration_s, outcome, error_code, origin, detail)
        self.record_mcp_calls(job_id, attempt, [call])

    def record_mcp_calls(self, job_id: UUID, attempt: int, calls: Sequence[CallEvent]) -> None:
        """Append MCP calls to the job's trail, in order, in one round trip."""
        if calls:
            with self.pool.progress("recording MCP calls") as conn:
                insert_calls(conn, job_id, attempt, calls)

    def add_note(self, job_id: UUID, attempt: int, message: str, **detail: Any) -> None:
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "detail": jsonb({"note": message, **detail}),
        }
        with self.pool.progress("adding a note") as conn:
            conn.execute(query("insert_note"), params)

    # ---- ends ------------------------------------------------------------------------------------
    def finish(
        self,
        job_id: UUID,
        attempt: int,
        results: Mapping[str, str],
        *,
        calls: Sequence[CallEvent] = (),
        note: Mapping[str, Any] | None = None,
        origin: str | None = None,
    ) -> bool:
        """running -> succeeded with its results, in one transaction; ``False`` (and nothing
        written) when this attempt is no longer the job's running attempt.

        ``results`` maps each of the job's formats to its content (others are refused:
        :class:`~pipeline.store.refusals.ResultFormatsRefused`). ``calls`` not yet in the trail and
        a ``note`` (``{"note": text, ...}``, as :meth:`add_note` writes it) are written in the same
        transaction, so that a finished attempt costs one transaction; like
        :meth:`record_mcp_call` and :meth:`add_note` they are kept even for a stale attempt.
        ``origin``, the server that converted it, is recorded on the job (and so in its
        "succeeded" event) when given; else the one a stage recorded stays.
        """
        if not results:
            raise ValueError("finish() needs the results of the job's formats")
        return self.finish_end(AttemptResults(job_id, attempt, results, calls, note, origin))

    def finish_end(self, end: AttemptResults) -> bool:
        """:meth:`finish` of one attempt's end as a round or a journal holds it."""
        return self.result_writer.finish([end])[0]

    def finish_together(self, ends: Sequence[AttemptResults]) -> list[bool]:
        """Many attempts' :meth:`finish` in one statement (a round's results: migration 0025's
        ``finish_attempts``): one commit, so one wait for the disk, and one UPDATE of the jobs,
        whatever their number. Each is fenced
        on its own: ``False`` for an attempt that no longer owns its job (nothing of it but its
        calls and note written), the others are stored all the same. Results too large to be
        parameters, or kept in an object store, are stored one attempt at a time. A
        :class:`~pipeline.store.refusals.ResultFormatsRefused` (results that are not a job's
        formats: a bug) undoes the whole transaction; the caller finishes each alone to find
        whose."""
        return self.result_writer.finish(ends)

    def finish_then_claim(
        self,
        ends: Sequence[AttemptResults],
        lead: Job,
        worker: str,
        lease_s: float,
        *,
        limit: int,
        small_below: int,
    ) -> tuple[list[bool], list[Job]]:
        """:meth:`finish_together`, then :meth:`claim_round`, in one transaction and one round
        trip: a growing round's one wait for the disk serves its stored results and its next
        jobs. Where a result cannot go inline (too large, or an object store), the two are
        made apart. A ResultFormatsRefused undoes both (the caller stores each result alone)."""
        params = _round_params(lead, worker, lease_s, limit=limit, small_below=small_below)
        stored, rows = self.result_writer.finish_then_claim(ends, params)
        return stored, _in_round_order(rows)

    def fail(
        self, job_id: UUID, attempt: int, error: PipelineError, *, stage: Stage | None = None
    ) -> bool:
        """running -> failed with the error's code, and ``stage``, the step it failed in (None:
        the stage last written stays); ``False`` for a stale attempt."""
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "stage": stage.value if stage is not None else None,
            **error_columns(error),
        }
        return self.pool.update("failing a job", query("mark_failed"), params)

    def schedule_retry(
        self,
        job_id: UUID,
        attempt: int,
        error: PipelineError,
        *,
        delay: timedelta | float,
        spend_attempt: bool = True,
        stage: Stage | None = None,
    ) -> JobState | None:
        """running -> retrying, due ``delay`` from now (the database's clock).

        Returns ``RETRYING``; or ``FAILED`` when this charged attempt was the job's last (the
        caller must not retry then); or ``None`` for a stale attempt. ``spend_attempt=False``
        (the circuit breaker was open, the server never asked) refunds the attempt the claim
        charged: ``attempts_spent`` goes back down, while ``attempt``, the fencing token, keeps
        growing so the stale-write guard stays sound. ``stage`` as for :meth:`fail`.
        """
        delay_s = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "spend": spend_attempt,
            "delay_s": max(delay_s, 0.0),
            "stage": stage.value if stage is not None else None,
            **error_columns(error),
        }
        reason = None if spend_attempt else f"{error.code}: retry without charging an attempt"
        with self.pool.because("scheduling a retry", reason) as conn:
            row = conn.execute(query("schedule_retry"), params).fetchone()
        return JobState(row[0]) if row else None
