"""The job processor: "drain this queue" in, the queue's jobs run, PostgreSQL the only truth.

A broker message only rings the bell. :meth:`JobProcessor.drain` claims the fair order's next
job (the one claim, migration 0021: due retries staged, tenants' caps exact, priorities and
lanes), runs it, and claims again, until a claim finds nothing it may take or the time budget
(``DOCLANE_ROUND_MAX_S``) ends, when it rings the queue again so that the queues a pool process
serves take turns and a warm shutdown waits for one job at most. A job that must be tried
again is ``retrying`` with its due time in its row; its queue is rung for that time, and a
bell lost meanwhile costs one reconcile interval (the reconciler rings where work waits).

It knows no Celery. Every write after the claim is guarded by the attempt, so an attempt that
lost its job (cancelled, or requeued because it looked dead) writes nothing.

What was claimed runs on the runner that fits it (:mod:`.runner`): alone (:mod:`.lone`), in a
batch (:mod:`.batching`) or in a round (:mod:`.rounds`). The parts live beside
it: :mod:`.sourcing`, :mod:`.journal` (the attempt's fenced writes), :mod:`.failures` (the
job-level retry policy), :mod:`.lease` (the lease, and noticing a cancel). A cancelled job
stops cooperatively: its lease keeper cancels the attempt's
:class:`~pipeline.mcp.watchdog.CancelScope`, the MCP call in flight ends at once, and the attempt
writes nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from errors import DatabaseUnavailable
from pipeline.jobs.model import Job
from pipeline.mcp.timeouts import CallTimeouts
from pipeline.processing.batching import BatchRunner, UnitRunner
from pipeline.processing.concurrency import ServerConcurrency
from pipeline.processing.failures import FailurePolicy, after_reset, ring_when_due
from pipeline.processing.lone import LoneRunner
from pipeline.processing.outcomes import Outcome
from pipeline.processing.rounds import RoundRunner
from pipeline.processing.runner import Claim, Runner, SharingRunner, log_claimed
from pipeline.processing.settings import ProcessingSettings
from pipeline.processing.sourcing import SourcePreparer
from pipeline.profiles.settings import ProfileSettings
from pipeline.queues import SMALL_BELOW_BYTES, Publisher, RecordingPublisher, Wakeup, ring
from pipeline.sources.downloader import Downloader
from pipeline.sources.settings import SourceSettings
from pipeline.store.attempts import Attempts, ClaimFound
from pipeline.support.logs import job_context
from pipeline.support.waits import half_jitter

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
        if not self._sharing or self.batches.servers_batch.decided is not False:
            return
        self._sharing = []
        self._claims_rounds = True


def _companions_of(lead: Job, runner: SharingRunner) -> list[Job]:
    """The jobs ``runner`` claims to run with ``lead``; none when the database is away: the
    lead goes alone and the others wait their turn."""
    try:
        return runner.claim_companions(lead)
    except DatabaseUnavailable as exc:
        log.warning("cannot claim jobs to run with this one: %s", exc)
        return []
