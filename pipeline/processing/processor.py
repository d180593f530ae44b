"""The job processor: "drain this queue" in, the queue's jobs run, PostgreSQL the only truth.

A broker message only rings the bell. :meth:`JobProcessor.drain` claims the fair order's next
job (the one claim, migration 0021: due retries staged, tenants' caps exact, priorities and
lanes), runs it, and claims again, until a claim finds nothing it may take or the time budget
(``DOCLANE_ROUND_MAX_S``) ends, when it rings the queue again so that the queues a pool process
serves take turns and a warm shutdown waits for one job at most. A job that must be tried
again is ``retrying`` with its due time in its row; its queue is rung for that time, and a
bell lost meanwhile costs one reconcile interval (the reconciler rings where work waits).

It knows no Celery. A claimed job's source is validated again (the file may have changed or
vanished since submission; E1xx fails the job without calling a server), a URL is fetched
unless the server fetches URLs, the conversion goes through the resilience layer (retry
outside, breaker inside, one origin per unit), and the results and the ``succeeded`` state are
stored in one transaction. Every write after the claim is guarded by the attempt, so an attempt
that lost its job (cancelled, or requeued because it looked dead) writes nothing.

What was claimed runs on the runner that fits it (:mod:`.runner`): alone (:class:`LoneRunner`,
below), in a batch (:mod:`.batching`) or in a round (:mod:`.rounds`). The parts live beside
it: :mod:`.sourcing`, :mod:`.journal` (the attempt's fenced writes), :mod:`.failures` (the
job-level retry policy), :mod:`.lease` (the lease, and noticing a cancel). A cancelled job
stops cooperatively: its lease keeper cancels the attempt's :class:`~pipeline.mcp.CancelScope`,
the MCP call in flight ends at once, and the attempt writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from errors import CallCancelled, CallTimeout, DatabaseUnavailable, PipelineError, classify
from pipeline.jobs import Job, Stage
from pipeline.jobs.options import server_options
from pipeline.mcp import CallTimeouts, CancelScope, McpClient
from pipeline.processing.attempt import Attempt
from pipeline.processing.batching import BatchRunner, UnitRunner
from pipeline.processing.concurrency import ServerConcurrency
from pipeline.processing.failures import FailurePolicy, after_reset, lost, ring_when_due
from pipeline.processing.journal import AttemptJournal, AttemptLost, engine_of, job_masker
from pipeline.processing.lease import keep_lease
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.rounds import RoundRunner
from pipeline.processing.runner import Claim, Runner, SharingRunner, log_claimed
from pipeline.processing.settings import ProcessingSettings
from pipeline.processing.sourcing import SourcePreparer
from pipeline.profiles import (
    Conversion,
    ConversionRequest,
    KeptDocument,
    McpCallRecord,
    ProfileSettings,
    ToolCalls,
    select_profile,
)
from pipeline.queues import SMALL_BELOW_BYTES, Publisher, RecordingPublisher, Wakeup, ring
from pipeline.resilience import RetryRecord
from pipeline.sources import Downloader, SourceSettings
from pipeline.sources.pathmap import PathMap
from pipeline.store import Attempts, ClaimFound
from pipeline.support.logs import job_context, update_job_context
from pipeline.support.tracing import job_span
from pipeline.support.waits import half_jitter

T = TypeVar("T")
log = logging.getLogger("doclane.processor")


@dataclass(frozen=True, slots=True)
class Drained:
    """What one drain did: the jobs its claims took (a round's growth takes more), and why
    it stopped."""

    jobs: int
    #: ``empty``/``capped`` (a claim found nothing it may take), ``budget`` (rung again),
    #: ``circuits`` or ``database`` (rung again for later).
    stopped: str


class JobProcessor:
    """Drains queues, a job (or a round, or a batch) at a time; one per worker process."""

    def __init__(
        self,
        *,
        store: Attempts,
        runner: UnitRunner,
        settings: ProcessingSettings,
        source_settings: SourceSettings,
        profile_settings: ProfileSettings,
        downloader: Downloader | None = None,
        deadline_exceptions: tuple[type[BaseException], ...] = (),
        publisher: Publisher | None = None,
        timeouts: CallTimeouts | None = None,
    ) -> None:
        """Small file jobs are converted in batches (``DOCLANE_BATCH_MAX_DOCS``,
        :mod:`.batching`) where the server offers a directory tool, else in rounds
        (``DOCLANE_ROUND_MAX_DOCS``, :mod:`.rounds`). ``publisher`` rings the queues again
        (none: a drain rings nothing, as in tests that drive it by hand)."""
        self.store = store
        self.runner = runner
        self.settings = settings
        self.publisher: Publisher = publisher or RecordingPublisher()
        path_map = source_settings.path_mapper()
        sources = SourcePreparer(source_settings, path_map, downloader)
        failures = FailurePolicy(store, settings)
        self.worker_id = settings.resolved_worker_id()
        self.lone = LoneRunner(
            store=store,
            runner=runner,
            settings=settings,
            profile_settings=profile_settings,
            path_map=path_map,
            sources=sources,
            failures=failures,
            deadline_exceptions=deadline_exceptions,
        )
        self.batches = BatchRunner(
            store=store,
            runner=runner,
            failures=failures,
            sources=sources,
            settings=settings,
            profile_settings=profile_settings,
            path_map=path_map,
            inbox_dir=source_settings.inbox_dir,
            publisher=self.publisher,
            timeouts=timeouts or CallTimeouts(),
            worker_id=self.worker_id,
        )
        self.rounds = (
            RoundRunner(
                store=store,
                steps=self.lone,
                failures=failures,
                settings=settings,
                publisher=self.publisher,
                worker_id=self.worker_id,
                concurrency=ServerConcurrency(
                    runner, profile_settings, settings.server_concurrency
                ),
            )
            if settings.round_max_docs > 1
            else None
        )
        #: Where no batch can be led, a claim takes its round's companions with it (one round
        #: trip); else the lead is claimed alone and its companions once it is known, by the
        #: first runner it can lead.
        self._claims_rounds = True
        self._sharing: list[SharingRunner] = []
        if self.batches.possible:
            self._claims_rounds = False
            self._sharing = [self.batches] if self.rounds is None else [self.batches, self.rounds]

    def close(self) -> None:
        """Stop the round threads (a worker process's shutdown); no attempt is running."""
        if self.rounds is not None:
            self.rounds.close()

    # ---- the one entry point ------------------------------------------------------------------
    def drain(self, queue: str) -> Drained:
        """Claim and run ``queue``'s jobs in fair order until a claim finds nothing it may take
        or the time budget ends (see the module docstring). Never raises for anything a job
        can run into."""
        started = time.monotonic()
        jobs = 0
        while True:
            refusing_s = self.runner.refusing_for()
            if refusing_s > 0:  # every circuit open: claiming would only fail the jobs (E309)
                self._again(queue, after_reset(refusing_s))
                return Drained(jobs, "circuits")
            if jobs and time.monotonic() - started >= self.settings.round_max_s:
                self._again(queue, None)
                return Drained(jobs, "budget")
            try:
                claim = self.claim(queue)
            except DatabaseUnavailable as exc:
                log.warning("cannot claim: %s; ringing again later", exc)
                self._again(queue, half_jitter(self.settings.db_retry_s))
                return Drained(jobs, "database")
            if isinstance(claim, ClaimFound):
                if not jobs:  # a bell that found no work: said once, as a doubled bell's cost
                    log.info("nothing to claim in %s: %s", queue, claim.value)
                return Drained(jobs, claim.value)
            jobs += 1 + len(claim.companions)
            self.run(claim)

    def claim(self, queue: str) -> Claim | ClaimFound:
        """The one claim: the fair order's next job of ``queue`` (with its round's companions
        where rounds are claimed with it), or what the claim found instead."""
        room = self.rounds.room if self.rounds is not None and self._claims_rounds else 1
        taken = self.store.claim_queue(
            queue, self.worker_id, self.settings.lease_s, limit=room, small_below=SMALL_BELOW_BYTES
        )
        if taken.lead is None:
            return taken.found
        return Claim(taken.lead, taken.companions)

    def run(self, claim: Claim) -> Outcome:
        """What one claim took, on the runner that fits it; the lead's outcome (a lead that
        must be tried again rings its queue for when it is due)."""
        lead = claim.lead()
        with job_context(str(lead.id)):
            log_claimed(lead)
            runner, claim = self._fit(claim)
            outcome = runner.run(claim)
            ring_when_due(self.publisher, lead, outcome)
            return outcome

    def _again(self, queue: str, countdown_s: float | None) -> None:
        """Ring ``queue`` again (now, or after ``countdown_s``): work may wait there."""
        ring(self.publisher, [Wakeup(queue, countdown_s=countdown_s)])

    def _fit(self, claim: Claim) -> tuple[Runner, Claim]:
        """The runner that fits what was claimed: the round its claim took, else the first
        that the job can lead with companions claimed now, else the lone runner."""
        if claim.companions and self.rounds is not None:
            return self.rounds, claim
        lead = claim.lead()
        fitted: tuple[Runner, Claim] = (self.lone, claim)
        for runner in self._sharing:
            companions = _companions_of(lead, runner) if runner.may_lead(lead) else []
            if companions:
                fitted = (runner, replace(claim, companions=companions))
                break
        self._without_batches_once_known()
        return fitted

    def _without_batches_once_known(self) -> None:
        """Once the servers are known to take no batch, claims go as they do where batches
        are off: a round's companions claimed with its job, in one round trip."""
        batches = self.batches
        if not self._sharing or batches is None or batches.servers_batch.decided is not False:
            return
        self._sharing = []
        if self.rounds is not None:
            self._claim = self.rounds.claim


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


def _companions_of(lead: Job, runner: SharingRunner) -> list[Job]:
    """The jobs ``runner`` claims to run with ``lead``; none when the database is away: the
    lead goes alone and the others wait their turn."""
    try:
        return runner.claim_companions(lead)
    except DatabaseUnavailable as exc:
        log.warning("cannot claim jobs to run with this one: %s", exc)
        return []
