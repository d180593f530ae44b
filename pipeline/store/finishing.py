"""The one writer of an attempt's results: running -> succeeded with them, in one transaction.

Results are accepted only in the transaction that marks their attempt succeeded, and each
attempt is fenced on its own: ``False`` for one that no longer owns its job (nothing of it
written but its calls and note, which happened). Two ways in, chosen by one rule
(:meth:`ResultWriter.fits_inline`):

- small results in PostgreSQL go as parameters to ``finish_attempt`` (migration 0009), one
  statement for one attempt, or to ``finish_attempts`` (migration 0025), one statement for a
  round's many: a job that converts in milliseconds must not spend more on the driver, nor
  PostgreSQL more on a statement's start and its triggers, than on the conversion;
- larger ones are streamed in by binary COPY a slice at a time (a parameter would hold the whole
  text twice), and results kept in an object store are uploaded first and committed by address,
  so "succeeded" is never committed before its objects exist.

Results that are not the job's formats are refused (:class:`~pipeline.store.refusals.
ResultFormatsRefused`): by the database in the first way (SQLSTATE DL001), by Python in the second.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from errors import PipelineError
from pipeline.store.large_values import copy_results_in
from pipeline.store.pool import OnPool
from pipeline.store.queries import query
from pipeline.store.refusals import ResultFormatsRefused
from pipeline.store.rows import AttemptResults, CallEvent, calls_json, jsonb, round_params

#: Results up to this many characters in all go to ``finish_attempt`` as parameters, one
#: statement; larger ones by COPY a slice at a time (a parameter holds the whole text twice).
INLINE_RESULTS_MAX_CHARS = 1 << 20
#: The SQLSTATE ``finish_attempt`` raises when the results are not the job's formats.
RESULT_FORMATS_REFUSED = "DL001"


@contextmanager
def _result_formats_refused() -> Iterator[None]:
    """``finish_attempt``'s refusal of results that are not the job's formats, as
    :class:`ResultFormatsRefused`; every other psycopg error passes through as it is."""
    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate == RESULT_FORMATS_REFUSED:
            raise ResultFormatsRefused(exc.diag.message_primary or str(exc)) from exc
        raise


def _check_formats(job_id: UUID, wanted: Sequence[str], results: Mapping[str, str]) -> None:
    if set(wanted) != set(results):
        raise ResultFormatsRefused(
            f"job {job_id} wants formats {sorted(wanted)}, got results for {sorted(results)}"
        )


def insert_calls(
    conn: psycopg.Connection, job_id: UUID, attempt: int, calls: Sequence[CallEvent]
) -> None:
    """Append ``calls`` to the job's trail (kept even for a stale attempt: they happened)."""
    if calls:
        params = {"job_id": job_id, "attempt": attempt, "calls": calls_json(calls)}
        conn.execute(query("insert_mcp_calls"), params)


def _stored(cur: psycopg.Cursor[Any]) -> bool:
    row = cur.fetchone()
    return row is not None and row[0] is not None


def _stored_each(cur: psycopg.Cursor[Any]) -> list[bool]:
    """``finish_attempts``' answer: whether each attempt was stored, in the order given."""
    row = cur.fetchone()
    assert row is not None
    return [bool(stored) for stored in row[0]]


class ResultWriter(OnPool):
    """Attempts' successful ends written through ``pool``."""

    def fits_inline(self, end: AttemptResults) -> bool:
        """Whether ``end`` goes to ``finish_attempt`` as parameters (see the module's doc)."""
        return (
            self.pool.result_objects is None
            and sum(len(content) for content in end.results.values()) <= INLINE_RESULTS_MAX_CHARS
        )

    def finish(self, ends: Sequence[AttemptResults]) -> list[bool]:
        """Each of ``ends`` stored, or ``False`` for a stale attempt. Those that fit inline are
        one transaction and one round trip, so one wait for the disk whatever their number; a
        refusal undoes that whole transaction (the caller finishes each alone to find whose).
        The others are stored one attempt at a time."""
        inline = [n for n, end in enumerate(ends) if self.fits_inline(end)]
        together, _ = self._finish_inline([ends[n] for n in inline])
        stored = dict(zip(inline, together, strict=True))
        for n, end in enumerate(ends):
            if n not in stored:
                stored[n] = self._finish_streamed(end)
        return [stored[n] for n in range(len(ends))]

    def finish_then_claim(
        self, ends: Sequence[AttemptResults], claim: Mapping[str, Any]
    ) -> tuple[list[bool], list[dict[str, Any]]]:
        """:meth:`finish`, then sql/rounds.sql's ``claim_round`` with ``claim``, in one
        transaction and one round trip when every end fits inline; else the two apart. The
        claimed rows as they come."""
        if not all(self.fits_inline(end) for end in ends):
            stored = self.finish(ends)
            return stored, self.pool.fetch_rows("claiming a round", query("claim_round"), claim)
        return self._finish_inline(ends, claim)

    def _finish_inline(
        self, ends: Sequence[AttemptResults], claim: Mapping[str, Any] | None = None
    ) -> tuple[list[bool], list[dict[str, Any]]]:
        """``finish_attempt`` for each of ``ends``, and with ``claim`` the round's claim after
        them in the same transaction: (stored, claimed rows)."""
        if not ends and claim is None:
            return [], []
        with _result_formats_refused(), self.pool.connection("storing results") as conn:
            if claim is None:  # one statement is its own transaction
                if len(ends) == 1:
                    return [_stored(conn.execute(query("finish_attempt"), ends[0].params()))], []
                return _stored_each(conn.execute(query("finish_attempts"), round_params(ends))), []
            with conn.pipeline(), conn.transaction():  # BEGIN, the ends, the claim, COMMIT
                finished = (
                    conn.execute(query("finish_attempts"), round_params(ends)) if ends else None
                )
                claimed = conn.cursor(row_factory=dict_row).execute(query("claim_round"), claim)
            stored = _stored_each(finished) if finished is not None else []
            return stored, claimed.fetchall()

    def _finish_streamed(self, end: AttemptResults) -> bool:
        """One attempt's results by COPY, or uploaded first and committed by address."""
        objects = self.pool.result_objects
        uploaded = objects.put(end.job_id, end.attempt, end.results) if objects else None
        params = {"job_id": end.job_id, "attempt": end.attempt, "origin": end.origin}
        with self.pool.connection("storing results") as conn, conn.transaction():
            with conn.pipeline():
                insert_calls(conn, end.job_id, end.attempt, end.calls)
                if end.note is not None:
                    note = {"job_id": end.job_id, "attempt": end.attempt, "detail": jsonb(end.note)}
                    conn.execute(query("insert_note"), note)
                row = conn.execute(query("mark_succeeded"), params).fetchone()
            if row is not None:
                _check_formats(end.job_id, row[0], end.results)
                if uploaded is None:
                    with conn.cursor().copy(query("copy_results")) as copy:
                        copy_results_in(copy, end.job_id, end.attempt, end.results)
                else:
                    conn.cursor().executemany(
                        query("insert_result_object"),
                        [
                            {
                                "job_id": end.job_id,
                                "attempt": end.attempt,
                                "format": item.format,
                                "object_uri": item.uri,
                                "object_size": item.size,
                                "object_sha256": item.sha256,
                            }
                            for item in uploaded
                        ],
                    )
        if row is None and objects is not None and uploaded:
            # a stale attempt's uploads are nobody's (left to the orphan sweep if this fails)
            with suppress(PipelineError):
                objects.delete([item.uri for item in uploaded])
        return row is not None
