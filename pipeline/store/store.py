"""The job store: every write the workers, the reconciler and the CLI make to PostgreSQL.

One ``JobStore`` per process (it owns a connection pool; create it after a fork, e.g. in Celery's
``worker_process_init``, and ``close()`` it at shutdown). Methods are safe to call from many
threads. Each method is one short transaction; the rules are the database's:

- only legal state transitions are possible (migration 0003 raises on any other);
- every write after a claim is guarded by ``(job_id, attempt, state = 'running')``: a stale or
  duplicate worker matches no row, writes nothing, and gets ``False``/``None`` back;
- results are accepted only in the transaction that marks their attempt succeeded;
- every change of state lands in ``job_events`` (a trigger), every MCP call through
  :meth:`record_mcp_call`;
- a running attempt's progress (stages, calls, notes, lease renewals) is committed without
  waiting for the disk (see ``_progress``); submissions, claims and outcomes wait for it;
- the two writes every job makes, a stage with its calls and the successful end with its
  results, are one statement each (migration 0009's functions): a job that converts in
  milliseconds must not spend more on the driver than on the conversion.

A database that cannot be reached raises :class:`errors.DatabaseUnavailable` (E401, retryable)
from every method; the pool replaces dead connections once the database is back.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO
from uuid import UUID, uuid4

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from errors import PipelineError, ResultsExpired
from pipeline.jobs import (
    Cancellation,
    CreatedJob,
    ExpiredLeases,
    Job,
    JobEvent,
    JobState,
    NewJob,
    ResultInfo,
    Stage,
)
from pipeline.store.connection import create_pool, database_errors, missing_schema_errors
from pipeline.store.large_values import copy_results_in, copy_single_value
from pipeline.store.queries import query
from pipeline.store.rows import (
    COPY_JOB_TYPES,
    AttemptResults,
    CallEvent,
    DedupKey,
    calls_json,
    canonical_json,
    copy_row,
    counts_by_state,
    dedup_key,
    error_columns,
    jsonb,
)
from pipeline.store.settings import StoreSettings, load_store_settings
from pipeline.support.tracing import store_span

if TYPE_CHECKING:  # imported where one is built: results in PostgreSQL need no object store
    from pipeline.store.result_objects import ObjectResults

log = logging.getLogger("doclane.store")

#: Results up to this many characters in all go to ``finish_attempt`` as parameters, one
#: statement; larger ones by COPY a slice at a time (a parameter holds the whole text twice).
INLINE_RESULTS_MAX_CHARS = 1 << 20
#: The SQLSTATE ``finish_attempt`` raises when the results are not the job's formats.
FORMATS_MISMATCH = "DL001"


@contextmanager
def _formats_mismatch() -> Iterator[None]:
    """``finish_attempt``'s refusal of results that are not the job's formats, as ValueError."""
    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate == FORMATS_MISMATCH:
            raise ValueError(exc.diag.message_primary or str(exc)) from exc
        raise


def _split(conn: psycopg.Connection, made: CreatedJob, spec: NewJob) -> CreatedJob:
    """``made`` split into ``spec.slices``: it waits, its slices are queued (migration 0017)."""
    params = {"job_id": made.job_id, "pages": list(spec.slices)}
    ids = [row[0] for row in conn.execute(query("split_job"), params).fetchall()]
    return CreatedJob(job_id=made.job_id, slice_ids=tuple(ids))


def _like_params(lead: Job, *, limit: int, small_below: int) -> dict[str, Any]:
    """Up to ``limit`` small due jobs like ``lead`` (its queue, profile, options and formats):
    what a batch's and a round's claims both ask (sql/batches.sql, sql/rounds.sql)."""
    return {
        "queue": lead.queue,
        "profile": lead.profile,
        "options": jsonb(lead.options),
        "formats": list(lead.formats),
        "small_below": small_below,
        "lead": lead.id,
        "limit": limit,
    }


def _round_params(
    lead: Job, worker: str, lease_s: float, *, limit: int, small_below: int
) -> dict[str, Any]:
    """sql/rounds.sql's ``claim_round`` parameters: jobs like ``lead``, claimed by ``worker``."""
    return {
        **_like_params(lead, limit=limit, small_below=small_below),
        "worker": worker,
        "lease_s": float(lease_s),
    }


def _in_round_order(rows: Iterable[dict[str, Any]]) -> list[Job]:
    jobs = [Job.model_validate(row) for row in rows]
    return sorted(jobs, key=lambda job: (-job.priority, job.created_at))


def _check_formats(job_id: UUID, wanted: Sequence[str], results: Mapping[str, str]) -> None:
    if set(wanted) != set(results):
        raise ValueError(
            f"job {job_id} wants formats {sorted(wanted)}, got results for {sorted(results)}"
        )


class JobStore:
    """Jobs, results and their trail in PostgreSQL, through one connection pool."""

    def __init__(
        self,
        settings: StoreSettings | None = None,
        *,
        explain_missing_schema: bool = False,
        result_objects: ObjectResults | None = None,
    ) -> None:
        """With ``explain_missing_schema``, a call that meets no doclane table or function
        raises E401 saying to run ``doclane db migrate`` (what the commands people type want)
        instead of psycopg's own error. ``result_objects`` is where results go when
        ``DOCLANE_RESULT_STORE`` names an object store (by default built from it on first use)."""
        self.settings = settings or load_store_settings()
        self._pool: ConnectionPool = create_pool(self.settings)
        self._explain_missing_schema = explain_missing_schema
        self._result_objects = result_objects

    @property
    def result_objects(self) -> ObjectResults | None:
        """The object half of the result store, or None when results live in PostgreSQL."""
        if self._result_objects is None and self.settings.result_store != "postgres":
            from pipeline.store.result_objects import ObjectResults

            self._result_objects = ObjectResults(self.settings.result_store)
        return self._result_objects

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- submission ---------------------------------------------------------------------------
    def create(
        self, spec: NewJob, *, dedup: bool = True, dedup_engine: str | None = None
    ) -> CreatedJob:
        return self.create_many([spec], dedup=dedup, dedup_engine=dedup_engine)[0]

    def create_many(
        self, specs: Iterable[NewJob], *, dedup: bool = True, dedup_engine: str | None = None
    ) -> list[CreatedJob]:
        """Queue many jobs in one transaction (one COPY), in input order.

        With ``dedup``, a spec whose content hash, profile, options and formats equal those of a
        succeeded job gets that job back (``deduplicated=True``) instead of a new one; with
        ``dedup_engine`` too, only a job whose results that engine made (its name, any version,
        or its name and version, as ``results.engine`` records it). A new
        job whose spec names ``slices`` is split in the same transaction (``split_job``,
        migration 0017): it waits, and its ``slice_ids`` are the jobs to publish.
        """
        specs = list(specs)
        if not specs:
            return []
        with self._connection("creating jobs") as conn, conn.transaction():
            known = self._succeeded_by_content(conn, specs, dedup_engine) if dedup else {}
            created: list[CreatedJob] = []
            rows: list[tuple[Any, ...]] = []
            for spec in specs:
                existing = known.get(dedup_key(spec)) if spec.content_sha256 else None
                if existing is not None:
                    created.append(CreatedJob(job_id=existing, deduplicated=True))
                    continue
                job_id = uuid4()
                created.append(CreatedJob(job_id=job_id))
                rows.append(copy_row(job_id, spec))
            if rows:
                with conn.cursor().copy(query("copy_jobs")) as copy:
                    copy.set_types(COPY_JOB_TYPES)
                    for row in rows:
                        copy.write_row(row)
            return [
                _split(conn, made, spec) if spec.slices and not made.deduplicated else made
                for spec, made in zip(specs, created, strict=True)
            ]

    # ---- a worker's attempt -------------------------------------------------------------------
    def claim(self, job_id: UUID, worker: str, lease_s: float) -> Job | None:
        """Start a new attempt: queued|retrying -> running with ``attempt + 1`` and a lease.

        ``None`` when the job is running elsewhere, finished or cancelled: nothing to do.
        """
        params = {"job_id": job_id, "worker": worker, "lease_s": float(lease_s)}
        return self._fetch_job("claiming a job", query("claim_job"), params)

    def claim_or_wait(
        self, job_id: UUID, worker: str, lease_s: float
    ) -> tuple[Job | None, float | None]:
        """:meth:`claim`, and when nothing was claimed :meth:`seconds_until_due`, in one round
        trip: a round's companions each leave a message that finds nothing to claim, and
        that message must cost as little as it can."""
        params = {"job_id": job_id, "worker": worker, "lease_s": float(lease_s)}
        with self._connection("claiming a job") as conn, conn.pipeline():
            claim = conn.cursor(row_factory=dict_row).execute(query("claim_job"), params)
            due = conn.cursor().execute(query("seconds_until_due"), {"job_id": job_id})
            row, wait = claim.fetchone(), due.fetchone()
        if row is not None:
            return Job.model_validate(row), None
        return None, float(wait[0]) if wait else None

    def claim_companions(
        self,
        lead: Job,
        worker: str,
        lease_s: float,
        *,
        candidates: int,
        small_below: int,
        choose: Callable[[list[dict[str, Any]]], list[UUID]],
    ) -> list[Job]:
        """Claim due jobs that can share ``lead``'s batch (see sql/batches.sql).

        ``choose`` picks among at most ``candidates`` locked rows (id, source_uri, size_bytes,
        content_sha256), in priority order; each chosen job is claimed as ``claim`` would.
        """
        params = _like_params(lead, limit=candidates, small_below=small_below)
        with self._connection("claiming a batch") as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            chosen = choose(cur.execute(query("batch_candidates"), params).fetchall())
            if not chosen:
                return []
            claim = {"job_ids": chosen, "worker": worker, "lease_s": float(lease_s)}
            rows = cur.execute(query("claim_batch_members"), claim).fetchall()
        order = {job_id: n for n, job_id in enumerate(chosen)}
        return sorted((Job.model_validate(r) for r in rows), key=lambda j: order[j.id])

    def claim_round(
        self, lead: Job, worker: str, lease_s: float, *, limit: int, small_below: int
    ) -> list[Job]:
        """Claim up to ``limit`` due jobs that can share ``lead``'s round, in one statement
        (sql/rounds.sql); each is claimed as :meth:`claim` claims one, in priority order."""
        params = _round_params(lead, worker, lease_s, limit=limit, small_below=small_below)
        rows = self._fetch_rows("claiming a round", query("claim_round"), params)
        return _in_round_order(rows)

    def claim_round_of(
        self, job_id: UUID, worker: str, lease_s: float, *, limit: int, small_below: int
    ) -> tuple[Job | None, list[Job], float | None]:
        """:meth:`claim_or_wait` and the round's claim in one round trip and one commit
        (sql/rounds.sql, ``claim_round_of``): the job if it could be claimed, up to ``limit``
        companions in priority order (also when the job itself is running elsewhere or ended),
        and how long the job still waits when it is a retrying job not yet due."""
        params = {
            "job_id": job_id,
            "worker": worker,
            "lease_s": float(lease_s),
            "limit": limit,
            "small_below": small_below,
        }
        with self._connection("claiming a round") as conn, conn.pipeline():
            claim = conn.cursor(row_factory=dict_row).execute(query("claim_round_of"), params)
            due = conn.cursor().execute(query("seconds_until_due"), {"job_id": job_id})
            rows, wait = claim.fetchall(), due.fetchone()
        lead: Job | None = None
        companions: list[Job] = []
        for row in rows:
            if row.pop("round_lead"):
                lead = Job.model_validate(row)
            else:
                companions.append(Job.model_validate(row))
        companions.sort(key=lambda job: (-job.priority, job.created_at))
        waits = float(wait[0]) if wait and lead is None else None
        return lead, companions, waits

    def release(self, job_id: UUID, attempt: int, *, reason: str) -> bool:
        """Give a running job back to the queue, its attempt refunded (False: stale attempt)."""
        with self._connection("releasing a job") as conn, conn.transaction():
            conn.execute(query("set_reason"), {"reason": reason})
            params = {"job_id": job_id, "attempt": attempt}
            return conn.execute(query("release_job"), params).rowcount == 1

    def seconds_until_due(self, job_id: UUID) -> float | None:
        """How long a retrying job still waits before it may be claimed (None: not waiting)."""
        params = {"job_id": job_id}
        rows = self._fetch_rows("reading a due time", query("seconds_until_due"), params)
        return float(rows[0]["wait_s"]) if rows else None

    def make_due(self, job_id: UUID) -> bool:
        """Let a retrying job be claimed now instead of at its next_attempt_at."""
        return self._update("making a job due", query("make_due"), {"job_id": job_id})

    def defer(self, job_id: UUID, delay_s: float) -> bool:
        """A waiting job whose message went back unclaimed (every circuit open) is due
        ``delay_s`` from now: its wait is then not taken for a lost message. A progress write
        (nothing about the job changed but when it is next tried); False: not waiting."""
        params = {"job_id": job_id, "delay_s": float(delay_s)}
        with self._progress("deferring a job") as conn:
            cur = conn.execute(query("defer_waiting"), params)
        return cur.rowcount == 1  # known once the pipeline is synced, at the block's end

    def renew_lease(self, job_id: UUID, attempt: int, lease_s: float) -> bool:
        params = {"job_id": job_id, "attempt": attempt, "lease_s": float(lease_s)}
        with self._progress("renewing a lease") as conn:
            cur = conn.execute(query("renew_lease"), params)
        return cur.rowcount == 1

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
        with self._connection("recording a stage") as conn:
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
        return self._update("recording a source", query("record_source"), params)

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
            with self._progress("recording MCP calls") as conn:
                self._insert_calls(conn, job_id, attempt, calls)

    def add_note(self, job_id: UUID, attempt: int, message: str, **detail: Any) -> None:
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "detail": jsonb({"note": message, **detail}),
        }
        with self._progress("adding a note") as conn:
            conn.execute(query("insert_note"), params)

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

        ``results`` maps each of the job's formats to its content. Contents are streamed in by
        binary COPY a slice at a time, so a 50 MB markdown costs about one slice of extra
        memory, not three copies of itself. ``calls`` not yet in the trail and a ``note``
        (``{"note": text, ...}``, as :meth:`add_note` writes it) are written first, in the same
        transaction (one round trip with the state change), so that a finished attempt costs
        one transaction; like :meth:`record_mcp_call` and :meth:`add_note` they are kept even
        for a stale attempt. ``origin``, the server that converted it, is recorded on the job
        (and so in its "succeeded" event) when given; else the one a stage recorded stays.
        """
        if not results:
            raise ValueError("finish() needs the results of the job's formats")
        if self.result_objects is not None:
            return self._finish_with_objects(
                self.result_objects, job_id, attempt, results, calls=calls, note=note, origin=origin
            )
        if sum(len(content) for content in results.values()) <= INLINE_RESULTS_MAX_CHARS:
            return self._finish_inline(
                job_id, attempt, results, calls=calls, note=note, origin=origin
            )
        params: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "origin": origin}
        with self._connection("storing results") as conn, conn.transaction():
            with conn.pipeline():
                self._insert_calls(conn, job_id, attempt, calls)
                if note is not None:
                    detail = {"job_id": job_id, "attempt": attempt, "detail": jsonb(note)}
                    conn.execute(query("insert_note"), detail)
                row = conn.execute(query("mark_succeeded"), params).fetchone()
            if row is None:
                return False  # the calls and the note stay: they happened
            _check_formats(job_id, row[0], results)
            with conn.cursor().copy(query("copy_results")) as copy:
                copy_results_in(copy, job_id, attempt, results)
        return True

    def finish_end(self, end: AttemptResults) -> bool:
        """:meth:`finish` of one attempt's end as a round or a journal holds it."""
        return self.finish(
            end.job_id,
            end.attempt,
            end.results,
            calls=end.calls,
            note=end.note,
            origin=end.origin,
        )

    def _finish_with_objects(
        self,
        objects: ObjectResults,
        job_id: UUID,
        attempt: int,
        results: Mapping[str, str],
        *,
        calls: Sequence[CallEvent],
        note: Mapping[str, Any] | None,
        origin: str | None,
    ) -> bool:
        """:meth:`finish` with the results uploaded first, then committed by address (see
        ``result_objects``): "succeeded" is never committed before its objects exist."""
        stored = objects.put(job_id, attempt, results)
        params: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "origin": origin}
        with self._connection("storing results") as conn, conn.transaction():
            with conn.pipeline():
                self._insert_calls(conn, job_id, attempt, calls)
                if note is not None:
                    detail = {"job_id": job_id, "attempt": attempt, "detail": jsonb(note)}
                    conn.execute(query("insert_note"), detail)
                row = conn.execute(query("mark_succeeded"), params).fetchone()
            if row is not None:
                _check_formats(job_id, row[0], results)
                conn.cursor().executemany(
                    query("insert_result_object"),
                    [
                        {
                            "job_id": job_id,
                            "attempt": attempt,
                            "format": item.format,
                            "object_uri": item.uri,
                            "object_size": item.size,
                            "object_sha256": item.sha256,
                        }
                        for item in stored
                    ],
                )
        if row is None:  # a stale attempt: what it uploaded is nobody's (else the sweep's)
            with suppress(PipelineError):
                objects.delete([item.uri for item in stored])
            return False
        return True

    def _finish_inline(
        self,
        job_id: UUID,
        attempt: int,
        results: Mapping[str, str],
        *,
        calls: Sequence[CallEvent],
        note: Mapping[str, Any] | None,
        origin: str | None,
    ) -> bool:
        """:meth:`finish` for results small enough to be parameters: one statement."""
        end = AttemptResults(job_id, attempt, results, calls, note, origin)
        with _formats_mismatch(), self._connection("storing results") as conn:
            row = conn.execute(query("finish_attempt"), end.params()).fetchone()
        return row is not None and row[0] is not None

    def finish_together(self, ends: Sequence[AttemptResults]) -> list[bool]:
        """Many attempts' :meth:`finish` in one transaction and one round trip (a round's
        results): one commit, so one wait for the disk, whatever their number. Each is fenced
        on its own: ``False`` for an attempt that no longer owns its job (nothing of it but its
        calls and note written), the others are stored all the same. Results too large to be
        parameters are stored one attempt at a time, as :meth:`finish` does. A ValueError
        (results that are not a job's formats: a bug) undoes the whole transaction; the caller
        finishes each alone to find whose.

        With results kept in an object store, each attempt is finished alone: its objects must
        exist before its own commit, so no round's commit can name another's unfinished upload.
        """
        inline = [
            self.result_objects is None
            and sum(len(content) for content in end.results.values()) <= INLINE_RESULTS_MAX_CHARS
            for end in ends
        ]
        stored: dict[int, bool] = {}
        together = [n for n, small in enumerate(inline) if small]
        if together:
            with _formats_mismatch(), self._connection("storing a round's results") as conn:
                with conn.pipeline(), conn.transaction():  # BEGIN, the finishes, COMMIT at once
                    cursors = [
                        conn.execute(query("finish_attempt"), ends[n].params()) for n in together
                    ]
                for n, cur in zip(together, cursors, strict=True):
                    row = cur.fetchone()
                    stored[n] = row is not None and row[0] is not None
        for n, small in enumerate(inline):
            if not small:
                stored[n] = self.finish_end(ends[n])
        return [stored[n] for n in range(len(ends))]

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
        made apart. A ValueError undoes both (the caller stores each result alone)."""
        inline = self.result_objects is None and all(
            sum(len(content) for content in end.results.values()) <= INLINE_RESULTS_MAX_CHARS
            for end in ends
        )
        if not inline:
            stored = self.finish_together(ends)
            more = self.claim_round(lead, worker, lease_s, limit=limit, small_below=small_below)
            return stored, more
        params = _round_params(lead, worker, lease_s, limit=limit, small_below=small_below)
        with _formats_mismatch(), self._connection("storing a round's results") as conn:
            with conn.pipeline(), conn.transaction():  # BEGIN, finishes, claim, COMMIT at once
                cursors = [conn.execute(query("finish_attempt"), end.params()) for end in ends]
                claim = conn.cursor(row_factory=dict_row).execute(query("claim_round"), params)
            stored = [(row := cur.fetchone()) is not None and row[0] is not None
                      for cur in cursors]  # fmt: skip
            rows = claim.fetchall()
        return stored, _in_round_order(rows)

    def fail(self, job_id: UUID, attempt: int, error: PipelineError) -> bool:
        """running -> failed with the error's code; ``False`` for a stale attempt."""
        params = {"job_id": job_id, "attempt": attempt, **error_columns(error)}
        return self._update("failing a job", query("mark_failed"), params)

    def schedule_retry(
        self,
        job_id: UUID,
        attempt: int,
        error: PipelineError,
        *,
        delay: timedelta | float,
        spend_attempt: bool = True,
    ) -> JobState | None:
        """running -> retrying, due ``delay`` from now (the database's clock).

        Returns ``RETRYING``; or ``FAILED`` when this charged attempt was the job's last (the
        caller must not retry then); or ``None`` for a stale attempt. ``spend_attempt=False``
        (the circuit breaker was open, the server never asked) refunds the attempt the claim
        charged: ``attempts_spent`` goes back down, while ``attempt``, the fencing token, keeps
        growing so the stale-write guard stays sound.
        """
        delay_s = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        params = {
            "job_id": job_id,
            "attempt": attempt,
            "spend": spend_attempt,
            "delay_s": max(delay_s, 0.0),
            **error_columns(error),
        }
        reason = None if spend_attempt else f"{error.code}: retry without charging an attempt"
        with self._connection("scheduling a retry") as conn, conn.transaction():
            if reason:
                conn.execute(query("set_reason"), {"reason": reason})
            row = conn.execute(query("schedule_retry"), params).fetchone()
        return JobState(row[0]) if row else None

    # ---- operators and the reconciler ---------------------------------------------------------
    def cancel(self, job_id: UUID, *, reason: str = "cancelled") -> Cancellation | None:
        """queued|retrying|running -> cancelled. ``None`` when the job is already finished (or
        unknown). A running job's worker finds out at its next guarded write, which fails."""
        with self._connection("cancelling a job") as conn, conn.transaction():
            conn.execute(query("lock_slices"), {"job_id": job_id})
            locked = conn.execute(query("lock_job_state"), {"job_id": job_id}).fetchone()
            if locked is None or JobState(locked[0]).terminal:
                return None
            conn.execute(query("set_reason"), {"reason": reason})
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(query("cancel_job"), {"job_id": job_id}).fetchone()
        if row is None:
            return None
        return Cancellation(job=Job.model_validate(row), previous_state=JobState(locked[0]))

    def requeue_expired_leases(
        self, *, now: datetime | None = None, limit: int = 1000
    ) -> ExpiredLeases:
        """Running jobs whose lease expired go back to ``queued`` (republish them), or to
        ``failed`` with E303 when that attempt was their last. One batch of at most ``limit``."""
        params = {"now": now, "limit": limit}
        with self._connection("requeueing expired leases") as conn, conn.transaction():
            conn.execute(query("set_reason"), {"reason": "lease expired"})
            rows = conn.execute(query("requeue_expired_leases"), params).fetchall()
        return ExpiredLeases(
            requeued=tuple(r[0] for r in rows if r[1] == JobState.QUEUED),
            failed=tuple(r[0] for r in rows if r[1] == JobState.FAILED),
        )

    def running_attempts(self, job_ids: Sequence[UUID]) -> set[tuple[UUID, int]]:
        """(job id, attempt) of those of ``job_ids`` that are running now."""
        if not job_ids:
            return set()
        with self._connection("reading running attempts") as conn:
            rows = conn.execute(query("running_attempts"), {"job_ids": list(job_ids)})
            return {(row[0], row[1]) for row in rows}

    def stale_queued(
        self,
        older_than: timedelta,
        *,
        now: datetime | None = None,
        limit: int = 1000,
        queues: Sequence[str] | None = None,
        states: Sequence[str] | None = None,
    ) -> list[UUID]:
        """Queued or retrying jobs overdue by more than ``older_than``: their message is presumed
        lost, the reconciler republishes them. Taking them restarts their clock (and notes it in
        their trail), so the next sweep does not republish them again before another
        ``older_than`` has passed. ``queues`` limits the sweep (None: every queue), ``states``
        to ``queued`` or ``retrying`` jobs (None: both)."""
        params = {
            "now": now,
            "older_than_s": older_than.total_seconds(),
            "limit": limit,
            "queues": list(queues) if queues is not None else None,
            "states": list(states) if states is not None else None,
        }
        with self._connection("finding stale jobs") as conn:
            return [r[0] for r in conn.execute(query("take_stale_waiting"), params)]

    def lost_queued(
        self,
        queue: str,
        *,
        waiting: int,
        older_than: timedelta,
        now: datetime | None = None,
        limit: int = 1000,
    ) -> list[UUID]:
        """Queued jobs of ``queue`` overdue by more than ``older_than`` beyond the ``waiting``
        messages the broker holds for it, oldest first: their messages are presumed lost (see
        sql/reconciler.sql). Taking them restarts their clock and notes it in their trail."""
        params = {
            "queue": queue,
            "waiting": waiting,
            "older_than_s": older_than.total_seconds(),
            "now": now,
            "limit": limit,
        }
        with self._connection("finding jobs whose message was lost") as conn:
            return [r[0] for r in conn.execute(query("take_lost_queued"), params)]

    # ---- reading ------------------------------------------------------------------------------
    def get_job(self, job_id: UUID) -> Job | None:
        return self._fetch_job("reading a job", query("get_job"), {"job_id": job_id})

    def get_jobs(self, job_ids: Iterable[UUID]) -> list[Job]:
        """The jobs that exist among ``job_ids``, in the order asked."""
        ids = list(job_ids)
        rows = self._fetch_rows("reading jobs", query("get_jobs"), {"job_ids": ids})
        by_id = {row["id"]: Job.model_validate(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def slices(self, job_id: UUID) -> list[Job]:
        """The slices a job was split into, in page order (none for a whole document)."""
        rows = self._fetch_rows("reading slices", query("get_slices"), {"job_id": job_id})
        return [Job.model_validate(row) for row in rows]

    def finished_among(self, job_ids: Iterable[UUID]) -> dict[UUID, JobState]:
        """Those of ``job_ids`` that have finished, with their state (cheap enough to poll)."""
        params = {"job_ids": list(job_ids)}
        with self._connection("reading job states") as conn:
            rows = conn.execute(query("finished_among"), params)
            return {row[0]: JobState(row[1]) for row in rows}

    def events(self, job_id: UUID) -> list[JobEvent]:
        rows = self._fetch_rows("reading events", query("job_events"), {"job_id": job_id})
        return [JobEvent.model_validate(row) for row in rows]

    def list_results(self, job_id: UUID) -> list[ResultInfo]:
        rows = self._fetch_rows("listing results", query("list_results"), {"job_id": job_id})
        return [ResultInfo.model_validate(row) for row in rows]

    def get_result(self, job_id: UUID, fmt: str) -> str | None:
        """One result's content as a ``str`` (from PostgreSQL: one copy in memory besides the
        driver's buffer); ``None`` when there is no such result, E113 when it expired."""
        params = {"job_id": job_id, "format": fmt}
        with self._connection("reading a result") as conn:
            row = conn.execute(query("result_location"), params).fetchone()
            if row is not None and row[0] is None:
                content = conn.execute(query("get_result"), params).fetchone()
                return content[0] if content else None
        if row is None:
            self.check_not_expired(job_id, fmt)
            return None
        out = io.BytesIO()
        self._objects_for(row[0]).write(row[0], out)
        return out.getvalue().decode()

    def write_result(self, job_id: UUID, fmt: str, out: BinaryIO) -> int | None:
        """Write one result's UTF-8 bytes to ``out`` without decoding it into a ``str``, from
        wherever it is kept: PostgreSQL's (binary COPY, from the driver's buffer to ``out``)
        or the object store's (streamed). Bytes written; ``None`` when there is no such result;
        :class:`errors.ResultsExpired` (E113) when the retention sweep deleted it."""
        params = {"job_id": job_id, "format": fmt}
        with self._connection("reading a result") as conn:
            row = conn.execute(query("result_location"), params).fetchone()
            if row is None:
                self.check_not_expired(job_id, fmt)
                return None
            if row[0] is None:
                with conn.cursor() as cur, cur.copy(query("copy_result_out"), params) as copy:
                    return copy_single_value(copy, out)
        return self._objects_for(row[0]).write(row[0], out)

    def _objects_for(self, uri: str) -> ObjectResults:
        """The result store's objects; one under another root (kept before the setting
        changed) is still read, through a store built for it."""
        from pipeline.store.result_objects import ObjectResults

        return self.result_objects or ObjectResults(uri)

    def check_not_expired(self, job_id: UUID, fmt: str | None = None) -> None:
        """E113 when the retention sweep deleted this job's results (``fmt``: that one)."""
        rows = self._fetch_rows("reading a result", query("result_expiry"), {"job_id": job_id})
        if rows and (fmt is None or fmt in rows[0]["formats"]):
            at = rows[0]["expired_at"]
            raise ResultsExpired(
                f"job {job_id}: its results expired on {at:%Y-%m-%d %H:%M} UTC "
                "(DOCLANE_RESULT_RETENTION) and were deleted",
                detail={"job_id": str(job_id), "expired_at": at.isoformat()},
            )

    def expire_results(self, cutoff: datetime, *, limit: int) -> list[tuple[UUID, str]]:
        """The retention sweep's batch: up to ``limit`` results created before ``cutoff``
        deleted, oldest first, and their jobs marked expired (a note in each history). Objects
        are deleted after the commit; one that cannot be is left to the orphan sweep, since no
        row names it any more. The (job id, format) pairs deleted."""
        params = {"cutoff": cutoff, "limit": limit}
        rows = self._fetch_rows("expiring results", query("expire_results"), params)
        uris = [row["object_uri"] for row in rows if row["object_uri"]]
        if uris:
            try:
                self._objects_for(uris[0]).delete(uris)
            except PipelineError as exc:
                log.warning("expired objects stay for the orphan sweep: %s", exc)
        return [(row["job_id"], row["format"]) for row in rows]

    def sweep_result_orphans(self, *, min_age: timedelta, limit: int) -> list[str]:
        """Delete objects under the result store's prefix that no row names and that are older
        than ``min_age`` (uploads whose commit never came), among ``limit`` listed keys."""
        objects = self.result_objects
        if objects is None:
            return []

        def referenced(uris: list[str]) -> set[str]:
            found = self._fetch_rows("finding orphans", query("referenced_objects"), {"uris": uris})
            return {row["object_uri"] for row in found}

        orphans = objects.orphans(referenced, min_age=min_age, limit=limit)
        if orphans:
            objects.delete(orphans)
        return orphans

    # ---- admin --------------------------------------------------------------------------------
    def count_in_flight(self) -> dict[JobState, int]:
        """Queued, waiting, running and retrying jobs right now; cheap at any table size."""
        rows = self._fetch_rows("counting jobs", query("count_in_flight"), {})
        return counts_by_state(rows, [s for s in JobState if not s.terminal])

    def failures_by_error_code(self, since: datetime) -> dict[str, int]:
        rows = self._fetch_rows(
            "counting failures", query("failures_by_error_code"), {"since": since}
        )
        return {r["error_code"]: r["jobs"] for r in rows}

    def ping(self) -> None:
        """Raise E401 unless the database answers."""
        with self._connection("pinging the database") as conn:
            conn.execute("SELECT 1")

    # ---- plumbing -----------------------------------------------------------------------------
    @contextmanager
    def _progress(self, action: str) -> Iterator[psycopg.Connection]:
        """One transaction of progress writes, sent in one round trip (pipeline mode) and
        committed without waiting for the WAL flush (``synchronous_commit = off``).

        A synchronous commit waits for an fsync: 2-3 ms on this project's machines, more than
        all else a job's progress writes cost. What goes through here (stages, the trail's
        calls and notes, lease renewals) is a progress report: a database crash may lose its
        last fraction of a second, which leaves no inconsistency (the attempt's fencing token
        comes from the claim, and the results from :meth:`finish`, both committed
        synchronously, and each synchronous commit flushes every earlier one with it).
        """
        with self._connection(action) as conn, conn.pipeline(), conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    @staticmethod
    def _insert_calls(
        conn: psycopg.Connection, job_id: UUID, attempt: int, calls: Sequence[CallEvent]
    ) -> None:
        if calls:
            params = {"job_id": job_id, "attempt": attempt, "calls": calls_json(calls)}
            conn.execute(query("insert_mcp_calls"), params)

    @contextmanager
    def _connection(self, action: str) -> Iterator[psycopg.Connection]:
        schema = missing_schema_errors(action) if self._explain_missing_schema else nullcontext()
        with store_span(action), schema, database_errors(action), self._pool.connection() as conn:
            yield conn

    def _update(self, action: str, sql: str, params: Mapping[str, Any]) -> bool:
        with self._connection(action) as conn:
            return conn.execute(sql, params).rowcount == 1

    def _fetch_rows(self, action: str, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        with self._connection(action) as conn:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

    def _fetch_job(self, action: str, sql: str, params: Mapping[str, Any]) -> Job | None:
        with self._connection(action) as conn:
            row = conn.cursor(row_factory=dict_row).execute(sql, params).fetchone()
        return Job.model_validate(row) if row else None

    @staticmethod
    def _succeeded_by_content(
        conn: psycopg.Connection, specs: list[NewJob], engine: str | None
    ) -> dict[DedupKey, UUID]:
        hashes = sorted({s.content_sha256 for s in specs if s.content_sha256})
        if not hashes:
            return {}
        params = {"hashes": hashes, "engine": engine or None}
        rows = conn.execute(query("find_succeeded_by_content"), params)
        return {
            (sha, profile, canonical_json(options), tuple(formats)): job_id
            for job_id, sha, profile, options, formats in rows
        }
