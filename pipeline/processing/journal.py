"""What a running attempt writes while it works: its stage, its MCP calls, what it learnt.

Every write is fenced by (job id, attempt) and the ``running`` state, so an attempt that lost its
job (cancelled, or requeued because it looked dead) writes nothing and stops at its next step.
None of these writes is worth a conversion: the stage and the call history are progress
reports, so when the database does not answer they are logged and skipped, never raised into
the MCP unit, where the retry layer would take a retryable E401 for a reason to convert the
document again.

Progress can be *held* (``hold_progress_s``): a stage reported while the attempt is younger than
that is not written at once. It goes with the attempt's next write (its results, or the calls
written on the way to a failure), or, if the attempt is still running when the hold ends, on the
process's timer thread (:mod:`.timers`). A document that converts in milliseconds then costs a
claim and one final write, not two progress writes besides (against a fast server, those
were half of a job's statements); a slow one shows its stage at most ``hold_progress_s`` late.
Whoever finds the job gone, the held write or a later one, stops the attempt as a failed lease
renewal does.
"""

from __future__ import annotations

import logging
import threading
import time
from contextvars import copy_context
from typing import TYPE_CHECKING, Any

from errors import ControlFlow, DatabaseUnavailable
from pipeline.jobs.model import Job, Stage
from pipeline.processing.lease import LeaseKeeper
from pipeline.processing.timers import TimerEntry, process_timers
from pipeline.profiles.base import Conversion, McpCallRecord
from pipeline.sources.models import SourceInfo
from pipeline.store.attempts import Attempts
from pipeline.store.rows import AttemptResults, CallEvent
from pipeline.support.secrets import Masker, process_masker

if TYPE_CHECKING:
    from pipeline.mcp.client import McpClient

log = logging.getLogger("doclane.processor")


class AttemptLost(ControlFlow):
    """This attempt lost its job (cancelled or requeued): stop, write nothing. The attempt's
    outcome is then ``OutcomeKind.LOST``.

    Control flow, so the retry and breaker layers it passes through neither retry it nor count
    it; the processor catches it by class.
    """


def job_masker(job: Job) -> Masker:
    """The process's masker, also putting the job's source as shown wherever its secret URL (a
    presigned URL's signature) is quoted: messages quote what failed, and an HTTP library names
    the URL it fetched; the exact URL is replaced first, the patterns catch it in any other
    spelling."""
    return process_masker().knowing(job.source_fetch_uri, job.source_uri)


def engine_of(client: McpClient) -> str | None:
    """The engine as the server names itself at initialize ("docling-rs 2.52.7"): what a
    conversion records (``Conversion.engine``), and its note then gives each result."""
    server = client.server
    if server is None:
        return None
    return f"{server.name} {server.version}".strip() or None


def conversion_note(conversion: Conversion, *, earlier: int = 0) -> dict[str, Any]:
    """The trail's note on how a document was converted (``{"note": text, ...}``).

    ``earlier`` counts the conversions of the attempt's tries that failed after converting (a
    transient export error, a server that restarted between convert and export): the profile
    counts only the conversions of the try that succeeded, and the trail must explain every
    conversion it shows.
    A try that exported what an earlier one kept converted nothing itself (its profile says so).
    """
    conversions, notes = earlier + conversion.conversions, conversion.notes
    if earlier and conversion.conversions:
        notes = [
            *notes,
            f"{earlier} earlier conversion{'s' if earlier > 1 else ''} in this attempt went with "
            "a try that failed after converting; this try converted again",
        ]
    return {
        "note": f"converted with profile {conversion.profile}"
        + (f" by {conversion.engine}" if conversion.engine else ""),
        "profile": conversion.profile,
        "engine": conversion.engine,
        "conversions": conversions,
        "document_key": conversion.document_key,
        "notes": notes,
    }


class AttemptJournal:
    """The fenced writes of one attempt of one job.

    With ``defer_calls`` an MCP call is not written on its own: it waits for the attempt's next
    write (a stage, the results) and goes in the same round trip, ahead of it, so the trail keeps
    its order at one round trip fewer per call. With ``hold_progress_s`` stages wait too (see the
    module docstring). Whoever defers must end with :meth:`flush` or :meth:`finish`, whatever
    happened (the calls happened).
    """

    def __init__(
        self,
        store: Attempts,
        job: Job,
        keeper: LeaseKeeper,
        *,
        defer_calls: bool = False,
        hold_progress_s: float = 0.0,
    ) -> None:
        self.store = store
        self.job = job
        self.keeper = keeper
        self.defer_calls = defer_calls
        self._pending: list[CallEvent] = []
        #: Conversions made by tries of this attempt that then failed (the note counts them).
        self.earlier_conversions = 0
        #: The server this attempt talks to, as the last stage said (the results record it).
        self.origin: str | None = None
        self._held: Stage | None = None
        self._hold_s = hold_progress_s
        self._hold_until = time.monotonic() + hold_progress_s if hold_progress_s > 0 else 0.0
        self._timer: TimerEntry | None = None
        #: Taken by every write of held state, so that the timer thread's write of a held stage
        #: and the attempt's own next write never cross (the trail keeps its order).
        self._lock = threading.Lock()
        #: The step the attempt is in, written or held (the claim starts it validating): a
        #: failure records it as the job's stage, so a failed job says where it failed.
        self.step = Stage.VALIDATING

    def hold_from_now(self) -> None:
        """Start the progress hold again: a round's job that waited for a free round thread
        starts its conversion now, and its hold counts from there (while it waited, its row
        said what was true: claimed, validating)."""
        with self._lock:
            if self._hold_s > 0 and self._held is None and self._timer is None:
                self._hold_until = time.monotonic() + self._hold_s

    def stage(self, stage: Stage, *, origin: str | None = None) -> None:
        """Record progress; AttemptLost when the job is no longer this attempt's."""
        self.step = stage
        if self.keeper.lost:
            self.flush()
            raise AttemptLost(f"the job was taken from this attempt before {stage.value}")
        with self._lock:
            if origin is not None:
                self.origin = origin
            if self._hold_until and time.monotonic() < self._hold_until:
                self._held = stage
                if self._timer is None:
                    context = copy_context()  # the timer's log lines name the job
                    self._timer = process_timers().schedule(
                        self._hold_until, lambda: context.run(self._write_held)
                    )
                return
            self._held = None
            ours = self._write_stage(stage)
        if ours is False:
            raise AttemptLost(f"the job was taken from this attempt before {stage.value}")

    def _write_stage(self, stage: Stage) -> bool | None:
        """One progress write with the calls before it (holding the lock); None if the database
        did not answer (a progress report is not worth failing for)."""
        job = self.job
        try:
            ours = self.store.set_stage(
                job.id, job.attempt, stage, origin=self.origin, calls=self._pending
            )
        except DatabaseUnavailable as exc:
            log.warning("could not record the %s stage: %s", stage.value, exc)
            return None
        self._pending = []
        return ours

    def _write_held(self) -> None:
        """On the timer thread: the hold is over and the attempt still runs; write its stage."""
        with self._lock:
            stage, self._held = self._held, None
            ours = self._write_stage(stage) if stage is not None else True
        if ours is False:
            self.keeper.job_lost()

    def _end_hold(self) -> Stage | None:
        """No held write from here on (holding the lock); the stage that was held, if any."""
        process_timers().cancel(self._timer)
        self._hold_until = 0.0
        stage, self._held = self._held, None
        return stage

    def call(self, origin: str, record: McpCallRecord) -> None:
        """Append one MCP call to the job's history (best effort) and to the log."""
        job = self.job
        detail = {"message": job_masker(job).text(record.message)} if record.message else None
        event = CallEvent(
            record.tool, record.duration_s, record.outcome, record.code, origin, detail
        )
        with self._lock:
            self._pending.append(event)
        if not self.defer_calls:
            self.flush()
        # A call that worked is in the trail with its duration; at fleet scale a log line for
        # each is noise and costs CPU. A call that failed is worth a line.
        log.log(
            logging.DEBUG if record.outcome == "ok" else logging.INFO,
            "%s %s in %.3fs%s",
            record.tool,
            record.outcome,
            record.duration_s,
            f" ({record.code}: {record.message})" if record.code else "",
        )

    def flush(self) -> None:
        """Write what is still waiting: the calls, and a held stage (best effort).

        The attempt is ending without results (a failure, a lost job): its last stage and server
        belong in the row beside the error, as if they had been written when reported.
        """
        with self._lock:
            held = self._end_hold()
            if held is not None:
                self._write_stage(held)
                return
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
        """The results, the calls not yet written, the server and a note on how the document was
        converted, in one transaction; ``False`` when the job is no longer this attempt's.

        A held stage is dropped: the job is done, which says more. May be called again after
        ``DatabaseUnavailable`` (nothing was written then).
        """
        with self._lock:
            done = self.store.finish_end(self._results(conversion))
            self._pending = []
        return done

    def results(self, conversion: Conversion) -> AttemptResults:
        """What :meth:`finish` stores, for a round that stores many attempts' together
        (``Attempts.finish_together``). The held stage is dropped as :meth:`finish` drops it."""
        with self._lock:
            return self._results(conversion)

    def _results(self, conversion: Conversion) -> AttemptResults:
        self._end_hold()
        self.step = Stage.STORING  # no write of its own: storing is the results' commit
        job = self.job
        return AttemptResults(
            job.id,
            job.attempt,
            conversion.outputs,
            calls=list(self._pending),
            note=conversion_note(conversion, earlier=self.earlier_conversions),
            origin=self.origin,
        )

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
