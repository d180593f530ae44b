"""The job processor: one message's job id in, one outcome out, with PostgreSQL as the only
truth. A message is a claim right on its queue: the job claimed is the fair order's, and on the
small queue a message stands for several jobs, taken in a round, or one after another.

It knows no Celery. Given a job id it claims the job (a guarded UPDATE: nothing to claim means a
duplicate or stale message, which is simply acknowledged), validates the source again (the file
may have changed or vanished since submission; E1xx fails the job without calling a server),
fetches a URL source itself unless the server fetches URLs, converts through the resilience
layer (retry outside, breaker inside, one origin per unit), and stores the results and the
``succeeded`` state in one transaction. Every write after the claim is guarded by the attempt,
so an attempt that lost its job (cancelled, or requeued because it looked dead) writes nothing.

What it returns tells the glue what to do with the message: acknowledge it, or publish it again
after ``countdown_s`` (a retryable error, an open circuit, an unreachable database).

What was claimed runs on the runner that fits it (:mod:`.runner`): alone (:class:`LoneRunner`,
below: the steps above), in a batch (:mod:`.batching`) or in a round (:mod:`.rounds`).

The parts live beside it: :mod:`.sourcing` (the source, again, at the worker), :mod:`.journal`
(the attempt's fenced writes), :mod:`.failures` (the job-level retry policy), :mod:`.lease`
(the lease, and noticing a cancel). A cancelled job stops cooperatively: the lease keeper finds
the row no longer this attempt's and cancels the attempt's :class:`~pipeline.mcp.CancelScope`;
the MCP call in flight ends at once (the server is sent ``notifications/cancelled``) and the
attempt writes nothing. No process is signalled, so no other job is disturbed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar
from uuid import UUID

from errors import (
    CallCancelled,
    CallTimeout,
    CircuitOpen,
    DatabaseUnavailable,
    PipelineError,
    classify,
)
from pipeline.jobs import Job, Stage
from pipeline.jobs.options import server_options
from pipeline.mcp import CallTimeouts, CancelScope, McpClient
from pipeline.processing.attempt import Attempt
from pipeline.processing.batching import BatchRunner, UnitRunner
from pipeline.processing.concurrency import ServerConcurrency
from pipeline.processing.failures import (
    FailurePolicy,
    after_reset,
    lost,
    publish_next_attempt,
    uncharged_retry,
)
from pipeline.processing.journal import AttemptJournal, AttemptLost, engine_of, job_masker
from pipeline.processing.lease import keep_lease
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.owed import OwedMessages
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
from pipeline.queues import JobMessage, Publisher, jobs_per_message, passes_on
from pipeline.resilience import RetryRecord
from pipeline.sources import Downloader, SourceSettings
from pipeline.sources.pathmap import PathMap
from pipeline.store import Attempts
from pipeline.support.logs import job_context, update_job_context
from pipeline.support.tracing import job_span
from pipeline.support.waits import half_jitter

T = TypeVar("T")
log = logging.getLogger("doclane.processor")

#: Why a message's claim took nothing, as its log line says it.
NOTHING_CLAIMED = {
    "empty": "no job waits in its queue",
    "capped": "the queue's waiting jobs are all of tenants paused or at their running cap; "
    "the message is owed to the queue",
}


class JobProcessor:
    """Runs one job attempt per call; one per worker process (it is thread-safe but unshared)."""

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
        """With a ``publisher`` (for the companions' next messages) small file jobs are
        converted in batches (``DOCLANE_BATCH_MAX_DOCS``, :mod:`.batching`) where the server
        offers a directory tool, else in rounds (``DOCLANE_ROUND_MAX_DOCS``, :mod:`.rounds`)."""
        self.store = store
        self.runner = runner
        self.settings = settings
        self.publisher = publisher
        #: Owed messages repaid after a capped tenant's job ends (:mod:`.owed`).
        self.owed = OwedMessages(store, publisher)
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
        self.batches = (
            BatchRunner(
                store=store,
                runner=runner,
                failures=failures,
                sources=sources,
                settings=settings,
                profile_settings=profile_settings,
                path_map=path_map,
                inbox_dir=source_settings.inbox_dir,
                publisher=publisher,
                timeouts=timeouts or CallTimeouts(),
                worker_id=self.worker_id,
            )
            if publisher is not None
            else None
        )
        self.rounds = (
            RoundRunner(
                store=store,
                steps=self.lone,
                failures=failures,
                settings=settings,
                publisher=publisher,
                worker_id=self.worker_id,
                concurrency=ServerConcurrency(
                    runner, profile_settings, settings.server_concurrency
                ),
            )
            if publisher is not None and settings.round_max_docs > 1
            else None
        )
        #: Where no batch can be led, a message's claim takes its round's companions with it
        #: (one round trip); else the job is claimed alone and its companions once it is known,
        #: by the first runner it can lead.
        self._claim: Callable[[UUID], Claim] = self._claim_alone
        self._sharing: list[SharingRunner] = []
        if self.batches is not None and self.batches.possible:
            self._sharing = [self.batches] if self.rounds is None else [self.batches, self.rounds]
        elif self.rounds is not None:
            self._claim = self.rounds.claim

    def close(self) -> None:
        """Stop the round threads (a worker process's shutdown); no attempt is running."""
        if self.rounds is not None:
            self.rounds.close()

    # ---- the one entry point ------------------------------------------------------------------
    def process(self, job_id: UUID) -> Outcome:
        """Run an attempt of the job the fair order gives for ``job_id``'s message (often
        another job of its queue), and of as many more as the message stands for (see
        :meth:`_more`); the first's outcome. Never raises for anything a job can run into."""
        with job_context(str(job_id)):
            refusing_s = self.runner.refusing_for()
            if refusing_s > 0:
                return self._wait_for_circuits(job_id, refusing_s)
            try:
                claim = self._claim(job_id)
            except DatabaseUnavailable as exc:
                log.warning("cannot claim: %s; trying again later", exc)
                return uncharged_retry(job_id, None, exc, half_jitter(self.settings.db_retry_s))
            if claim.wait_s:
                return _not_due(claim.job_id, claim.wait_s)
            if claim.job is None:
                log.info("nothing to claim: %s", NOTHING_CLAIMED.get(claim.found, claim.found))
                return Outcome(OutcomeKind.SKIPPED, job_id)
        started = time.monotonic()
        lead = claim.job
        taken, outcome = self._run(claim, first=True)
        with job_context(str(lead.id)):
            answer = self._answer(job_id, lead, outcome)
        self._more(lead, outcome, taken, started)
        return answer

    def _run(self, claim: Claim, *, first: bool) -> tuple[int, Outcome]:
        """What one claim took, on the runner that fits it: how many jobs, and the outcome of
        its lead. The message's first claim passes a message on when it took fewer jobs than
        the message stands for (:meth:`_pass_on`)."""
        lead = claim.lead()
        with job_context(str(lead.id)):  # logs and spans name the job claimed, not the message's
            log_claimed(lead)
            runner, claim = self._fit(claim)
            taken = 1 + len(claim.companions)
            if first:
                self._pass_on(claim, taken)
            outcome = runner.run(claim)
            self.owed.after(claim)
            return taken, outcome

    def _more(self, last: Job, outcome: Outcome, taken: int, started: float) -> None:
        """The message's further claims, one after another: a message on the small queue
        stands for several jobs (:func:`pipeline.queues.jobs_per_message`), and a first claim
        that took fewer (a job alone, a short batch) passed a message on for all of them
        already, so this task may take up to that many more while ``DOCLANE_ROUND_MAX_S``
        lasts, as a round grows, rather than leave each to a Celery message of its own. It
        stops at a job that did not end (a retry: a circuit, the database), and at a claim
        that finds nothing. Each further job's next attempt gets a message of its own."""
        allowed = jobs_per_message(last.queue)
        while (
            taken < allowed
            and outcome.kind in (OutcomeKind.SUCCEEDED, OutcomeKind.FAILED)
            and time.monotonic() - started < self.settings.round_max_s
        ):
            try:
                claim = self._claim(last.id)  # a claim right on its queue: the fair order's next
            except DatabaseUnavailable as exc:
                log.warning("cannot claim more for this message: %s", exc)
                return
            if claim.job is None:
                return
            last = claim.job
            more, outcome = self._run(claim, first=False)
            taken += more
            if outcome.retry and self.publisher is not None:
                publish_next_attempt(self.publisher, last, outcome)

    def _pass_on(self, claim: Claim, taken: int) -> None:
        """A message on the small queue stands for several jobs' claims: when its first claim
        took fewer, a message goes on for all of them (:func:`pipeline.queues.passes_on`),
        before the conversion, so another process may take it meanwhile; this task may then
        take the rest one after another (:meth:`_more`) without leaving the queue with fewer
        claim rights than jobs. It names the claimed job, whose queue it is a right on. A
        publish that fails leaves the rights to the reconciler's lost-message sweep, which
        counts them."""
        lead = claim.lead()
        if self.publisher is None or not passes_on(lead.queue, taken):
            return
        try:
            self.publisher.publish(JobMessage(lead.id, lead.queue, priority=lead.priority))
        except Exception as exc:  # any broker trouble: the reconciler counts what is missing
            log.warning("cannot pass the message on (the reconciler will): %s", exc)

    def _claim_alone(self, job_id: UUID) -> Claim:
        taken = self.store.claim_next(job_id, self.worker_id, self.settings.lease_s)
        return Claim(job_id, taken.lead, wait_s=taken.wait_s, found=taken.found)

    def _answer(self, job_id: UUID, lead: Job, outcome: Outcome) -> Outcome:
        """The outcome for the glue, which retries the message it was given: a job other than
        the message's own that must be tried again gets a message of its own instead (the
        message names the job whose due time brings it back into its lane)."""
        if not outcome.retry or lead.id == job_id or self.publisher is None:
            return outcome
        publish_next_attempt(self.publisher, lead, outcome)
        return replace(outcome, message_sent=True)

    def _fit(self, claim: Claim) -> tuple[Runner, Claim]:
        """The runner that fits what was claimed: the round its claim took, else the first
        that the job can lead with companions claimed now, else the lone runner."""
        if claim.companions and self.rounds is not None:
            return self.rounds, claim
        lead = claim.lead()
        for runner in self._sharing:
            companions = _companions_of(lead, runner) if runner.may_lead(lead) else []
            if companions:
                return runner, replace(claim, companions=companions)
        return self.lone, claim

    def _wait_for_circuits(self, job_id: UUID, refusing_s: float) -> Outcome:
        """Every server's circuit is open: the message goes back until the reset, the job
        unclaimed and uncharged. Claiming it only to fail it at once (E309) cost a claim, its
        trail and a retry's writes per job and per reset, for every job waiting in the queue.
        The job's due time moves with the message (one write), so the reconciler does not take
        it for a job whose message was lost; a database that cannot take that write is no
        reason to hold the message. A message that stands for no work (its job ended or runs
        elsewhere, on a queue whose messages stand for one job each) is done with, as its
        claim would be: sent back, it would only wait out the reset in the memory of the
        worker's main process (Celery holds a message with a countdown there until it is due,
        and takes more from the broker meanwhile), and in one outage those were thousands. A
        message on a queue whose messages stand for several jobs goes back while jobs wait
        there, whatever job it names: it is their claim right."""
        delay = after_reset(refusing_s)
        try:
            waiting = self.store.defer(job_id, delay)
        except DatabaseUnavailable as exc:
            log.warning("cannot note the wait for the circuits: %s", exc)
        else:
            if not waiting:
                log.info("nothing to wait for (finished, cancelled, unknown or running elsewhere)")
                return Outcome(OutcomeKind.SKIPPED, job_id)
        error = CircuitOpen(f"the circuit of every server is open for {refusing_s:.1f}s more")
        log.info("%s: not claimed; the message comes back in %.1fs", error.message, delay)
        return uncharged_retry(job_id, None, error, delay)


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
        return self.failures.failure(job, error, reached_server=attempt.tries.reached_server)

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


def _companions_of(lead: Job, runner: SharingRunner) -> list[Job]:
    """The jobs ``runner`` claims to run with ``lead``; none when the database is away: the
    lead goes alone and the others wait their turn."""
    try:
        return runner.claim_companions(lead)
    except DatabaseUnavailable as exc:
        log.warning("cannot claim jobs to run with this one: %s", exc)
        return []


def _not_due(job_id: UUID, wait_s: float) -> Outcome:
    """An early message (a duplicate, or a clock ahead of the database's): the job keeps its
    backoff; this message comes back when the job is due."""
    log.info("not due for %.1fs: the message waits until then", wait_s)
    return Outcome(
        OutcomeKind.RETRY,
        job_id,
        message="not due yet",
        countdown_s=round(wait_s + 0.05, 3),
        attempt_spent=False,
    )
