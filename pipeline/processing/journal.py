"""What a running attempt writes while it works: its stage, its MCP calls, what it learnt.

Every write is fenced by (job id, attempt) and the ``running`` state, so an attempt that lost its
job (cancelled, or requeued because it looked dead) writes nothing and stops at its next step.
None of these writes is worth a conversion: the stage and the call history are progress
reports, so when the database does not answer they are logged and skipped, never raised into
the MCP unit, where the retry layer would take a retryable E401 for a reason to convert the
document again.
"""

from __future__ import annotations

import logging
from typing import Any

from errors import DatabaseUnavailable, UnexpectedError
from pipeline.joblog import redact
from pipeline.jobs import Job, Stage
from pipeline.processing.lease import LeaseKeeper
from pipeline.profiles import Conversion, McpCallRecord
from pipeline.sources import SourceInfo
from pipeline.store import CallEvent, JobStore

log = logging.getLogger("doclane.processor")


class AttemptLost(UnexpectedError):
    """This attempt no longer owns its job (cancelled or requeued): stop, write nothing.

    A subclass of E399 so that the retry and breaker layers, which classify whatever passes
    through them, treat it as final and harmless; the processor catches it by class.
    """


def conceal(text: str, job: Job) -> str:
    """``text`` as it may be stored and shown: the job's secret URL (a presigned URL's
    signature) replaced by its masked form, and any other secret masked.

    Messages quote what failed, and an HTTP library names the URL it fetched; the exact URL is
    replaced first, the generic masking catches it in any other spelling.
    """
    if job.source_fetch_uri:
        text = text.replace(job.source_fetch_uri, job.source_uri)
    return redact(text)


def conversion_note(conversion: Conversion) -> dict[str, Any]:
    """The trail's note on how a document was converted (``{"note": text, ...}``)."""
    return {
        "note": f"converted with profile {conversion.profile}",
        "profile": conversion.profile,
        "conversions": conversion.conversions,
        "document_key": conversion.document_key,
        "notes": conversion.notes,
    }


class AttemptJournal:
    """The fenced writes of one attempt of one job.

    With ``defer_calls`` an MCP call is not written on its own: it waits for the attempt's next
    write (a stage, the results) and goes in the same round trip, ahead of it, so the trail keeps
    its order at one round trip fewer per call. Whoever defers must end with :meth:`flush` or
    :meth:`finish`, whatever happened (the calls happened).
    """

    def __init__(
        self, store: JobStore, job: Job, keeper: LeaseKeeper, *, defer_calls: bool = False
    ) -> None:
        self.store = store
        self.job = job
        self.keeper = keeper
        self.defer_calls = defer_calls
        self._pending: list[CallEvent] = []

    def stage(self, stage: Stage, *, origin: str | None = None) -> None:
        """Record progress; AttemptLost when the job is no longer this attempt's."""
        job = self.job
        if self.keeper.lost:
            self.flush()
            raise AttemptLost(f"the job was taken from this attempt before {stage.value}")
        try:
            ours = self.store.set_stage(
                job.id, job.attempt, stage, origin=origin, calls=self._pending
            )
        except DatabaseUnavailable as exc:
            log.warning("could not record the %s stage: %s", stage.value, exc)
            return
        self._pending = []
        if not ours:
            raise AttemptLost(f"the job was taken from this attempt before {stage.value}")

    def call(self, origin: str, record: McpCallRecord) -> None:
        """Append one MCP call to the job's history (best effort) and to the log."""
        job = self.job
        detail = {"message": conceal(record.message, job)} if record.message else None
        self._pending.append(
            CallEvent(record.tool, record.duration_s, record.outcome, record.code, origin, detail)
        )
        if not self.defer_calls:
            self.flush()
        # A call that worked is in the trail with its duration; at fleet scale a log line for
        # each is noise and costs CPU (issue 15). A call that failed is worth a line.
        log.log(
            logging.DEBUG if record.outcome == "ok" else logging.INFO,
            "%s %s in %.3fs%s",
            record.tool,
            record.outcome,
            record.duration_s,
            f" ({record.code}: {record.message})" if record.code else "",
        )

    def flush(self) -> None:
        """Write the calls still waiting for a write of their own (best effort)."""
        if not self._pending:
            return
        job = self.job
        try:
            self.store.record_mcp_calls(job.id, job.attempt, self._pending)
        except DatabaseUnavailable as exc:
            tools = ", ".join(call.tool for call in self._pending)
            log.warning("could not record the call(s) %s: %s", tools, exc)
        self._pending = []

    def finish(self, conversion: Conversion) -> bool:
        """The results, the calls not yet written and a note on how the document was converted,
        in one transaction; ``False`` when the job is no longer this attempt's."""
        job = self.job
        note = conversion_note(conversion)
        done = self.store.finish(
            job.id, job.attempt, conversion.outputs, calls=self._pending, note=note
        )
        self._pending = []
        return done

    def source(self, info: SourceInfo) -> None:
        """What the worker learnt about a source (a URL's real size and hash)."""
        if info.size_bytes is None or info.sha256 is None:
            return
        job = self.job
        recorded = self.store.record_source(
            job.id, job.attempt, size_bytes=info.size_bytes, content_sha256=info.sha256
        )
        if not recorded:
            raise AttemptLost("the job was taken from this attempt while reading its source")

    def conversion(self, conversion: Conversion) -> None:
        """A note on how the document was converted (best effort: the results are what count)."""
        job = self.job
        note = conversion_note(conversion)
        try:
            self.store.add_note(job.id, job.attempt, note.pop("note"), **note)
        except DatabaseUnavailable as exc:
            log.warning("could not note the conversion: %s", exc)
