"""A job alone: the steps of one attempt, on the calling thread (and, one job at a time, the
steps of a round's jobs, :class:`.rounds.AttemptSteps`).

The source is validated again (the file may have changed or vanished since submission; E1xx
fails the job without calling a server), a URL is fetched unless the server fetches URLs, the
conversion goes through the resilience layer (retry outside, breaker inside, one origin per
unit), and the results and the ``succeeded`` state are stored in one transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from errors import CallCancelled, CallTimeout, DatabaseUnavailable, PipelineError, classify
from pipeline.jobs.model import Job, Stage
from pipeline.jobs.options import server_options
from pipeline.mcp.client import McpClient
from pipeline.mcp.watchdog import CancelScope
from pipeline.processing.attempt import Attempt
from pipeline.processing.batching import UnitRunner
from pipeline.processing.failures import FailurePolicy, lost
from pipeline.processing.journal import AttemptJournal, AttemptLost, engine_of, job_masker
from pipeline.processing.lease import keep_lease
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.runner import Claim
from pipeline.processing.settings import ProcessingSettings
from pipeline.processing.sourcing import SourcePreparer
from pipeline.profiles.base import (
    Conversion,
    ConversionRequest,
    KeptDocument,
    McpCallRecord,
    ToolCalls,
)
from pipeline.profiles.selection import select_profile
from pipeline.profiles.settings import ProfileSettings
from pipeline.resilience.retry import RetryRecord
from pipeline.sources.pathmap import PathMap
from pipeline.store.attempts import Attempts
from pipeline.support.logs import update_job_context
from pipeline.support.tracing import job_span

log = logging.getLogger("doclane.processor")


@dataclass(kw_only=True, eq=False)
class LoneRunner:
    """A job alone, on the calling thread; and, one job at a time, the steps of a round's jobs
    (:class:`.rounds.AttemptSteps`)."""

    store: Attempts
    runner: UnitRunner
    settings: ProcessingSettings
    profile_settings: ProfileSettings
    path_map: PathMap
    sources: SourcePreparer
    failures: FailurePolicy
    #: What the task's time limit raises (Celery's soft limit): the attempt's E303.
    deadline_exceptions: tuple[type[BaseException], ...] = ()

    def run(self, claim: Claim) -> Outcome:
        attempt = self.begin(claim.lead())
        job = attempt.job
        try:
            with job_span("doclane.job.attempt", job.id, job.trace_context, attempt=job.attempt):
                return self._run_attempt(attempt)
        finally:
            attempt.keeper.stop()

    def begin(self, job: Job) -> Attempt:
        """A claimed job's attempt: its lease kept, its writes journaled, its calls cancellable."""
        scope = CancelScope()
        keeper = keep_lease(
            self.store,
            job,
            self.settings,
            on_lost=lambda: scope.cancel("the job was cancelled or taken from this attempt"),
        )
        journal = AttemptJournal(
            self.store,
            job,
            keeper,
            defer_calls=True,
            hold_progress_s=self.settings.progress_hold_s,
        )
        return Attempt(job, journal, keeper, scope)

    # ---- one attempt --------------------------------------------------------------------------
    def _run_attempt(self, attempt: Attempt) -> Outcome:
        """Convert, then store the results, the trail's last calls, the server and a note at once.

        The claim already recorded the ``validating`` stage; the results go in one transaction
        with the rest (fenced like every write), so a finished job costs a claim and one
        transaction, plus its stage writes (converting, exporting, each with the calls before
        it) if it is still running when the journal's progress hold ends.
        """
        started = time.monotonic()
        converted = self.convert(attempt)
        if isinstance(converted, Outcome):
            return converted
        outcome = self.store_results(attempt, lambda: attempt.journal.finish(converted))
        if outcome.kind is OutcomeKind.SUCCEEDED:
            log.info(
                "succeeded in %.2fs with profile %s (%s)",
                time.monotonic() - started,
                converted.profile,
                ", ".join(f"{fmt}: {len(text)} chars" for fmt, text in converted.outputs.items()),
            )
        return outcome

    def convert(self, attempt: Attempt) -> Conversion | Outcome:
        """The attempt's conversion, or the outcome that ended it without one."""
        job = attempt.job
        try:
            return self._convert(job, attempt.journal, attempt.scope, attempt.tries)
        except (AttemptLost, CallCancelled) as stopped:
            return lost(job, stopped.message)
        except Exception as exc:
            return self.fail(attempt, exc)

    def store_results(self, attempt: Attempt, write: Callable[[], bool]) -> Outcome:
        """The outcome of storing a conversion's results by ``write`` (False: not ours now).

        The conversion is done: a database that went away is waited for rather than lose it."""
        job = attempt.job
        try:
            if not self.failures.retry_while_database_down(write, "storing the results"):
                return lost(job, "storing")
        except Exception as exc:
            return self.fail(attempt, exc)
        return Outcome(OutcomeKind.SUCCEEDED, job.id, job.attempt)

    def fail(self, attempt: Attempt, exc: Exception) -> Outcome:
        """The outcome of an attempt that ``exc`` ended: given back when the database was
        lost, else the job's failure (retried or final, charged when a server was reached)."""
        job = attempt.job
        if isinstance(exc, DatabaseUnavailable):
            log.warning("database unreachable during the attempt: %s", exc)
            return self.failures.give_back_uncharged(job, exc)
        error = job_masker(job).error(self._as_catalog(exc))
        return self.failures.failure(
            job, error, reached_server=attempt.tries.reached_server, stage=attempt.journal.step
        )

    def _convert(
        self, job: Job, journal: AttemptJournal, scope: CancelScope, tries: RetryRecord
    ) -> Conversion:
        """The source, then the conversion through the resilience layer; whatever ends it, the
        calls made so far reach the trail before the attempt's outcome does."""
        try:
            source = self.sources.prepare(job, journal)
            try:
                request = ConversionRequest(
                    source=source.info.server_uri,
                    kind="url" if source.info.path is None else "file",
                    suffix=source.info.suffix,
                    formats=job.formats,
                    size_bytes=source.info.size_bytes,
                    options=server_options(job.options),
                    inbox=source.inbox,
                )
                kept: dict[str, KeptDocument] = {}  # by origin: what a try left on that server
                with scope:
                    return self.runner.run(
                        lambda client: self._unit(client, journal, request, kept),
                        label=f"job {job.id}",
                        record=tries,
                    )
            finally:
                source.discard()
        except BaseException:
            journal.flush()
            raise

    def _unit(
        self,
        client: McpClient,
        journal: AttemptJournal,
        request: ConversionRequest,
        kept: dict[str, KeptDocument],
    ) -> Conversion:
        """What must happen on one server: pick the profile from its tools, convert, export.

        The retry layer runs this again after a retryable failure, so nothing in it may fail
        for a reason other than the server's: the journal's writes never raise E401. A try on
        a server an earlier try converted on exports what that try kept (``kept``).
        """
        origin = client.origin
        update_job_context(origin=origin)
        journal.stage(Stage.CONVERTING, origin=origin)
        profile = select_profile(
            [tool.name for tool in client.tools()],
            journal.job.formats,
            self.profile_settings,
            self.path_map.to_worker_path,
        )
        converted = 0  # this try's conversions (a key evicted mid-try is converted again)

        def report(record: McpCallRecord) -> None:
            nonlocal converted
            journal.call(origin, record)
            if record.outcome == "ok" and record.stage == "convert":
                converted += 1
                if converted == 1:
                    journal.stage(Stage.EXPORTING, origin=origin)

        try:
            conversion = profile.convert(
                ToolCalls(client, report), request, kept.setdefault(origin, KeptDocument())
            )
        except BaseException:
            journal.earlier_conversions += converted  # the note counts what this try lost
            raise
        conversion.engine = engine_of(client)
        return conversion

    def _as_catalog(self, exc: BaseException) -> PipelineError:
        """The catalog error for what ended the attempt; a task deadline is a timeout (E303)."""
        cause: BaseException | None = exc
        while cause is not None:
            if self.deadline_exceptions and isinstance(cause, self.deadline_exceptions):
                return CallTimeout("the attempt reached its time limit for this size tier")
            cause = cause.__cause__
        error = classify(exc)
        if error.code == "E399":
            log.error("unexpected error", exc_info=exc)
        return error
