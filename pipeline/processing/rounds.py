"""Small documents in rounds: many jobs of one worker process in flight at once.

Against a server that converts a small document in milliseconds, a job at a time spends more on
its own bookkeeping (a claim, a commit that waits for the disk, Celery's hand-off) than on the
conversion. A round spreads that over many jobs. A drain's claim takes, in the same
statement, the fair order's next job and, when that is a never-tried small file job, up to
``DOCLANE_ROUND_MAX_DOCS - 1`` companions that can share its round (same queue,
profile, options and formats; small, never-tried file jobs), by the same rotation across
tenants (each tenant within its running cap; SKIP LOCKED, so two workers never wait for each
other's rows).

A round is continuous. Its documents are converted on the process's round threads, as many at a
time as its servers really run at once (:mod:`.concurrency`: docling-mcp one, docling-rs-mcp
its ``--concurrency``; or ``DOCLANE_SERVER_CONCURRENCY``; over stdio as many requests in flight
on the child's pipe, matched by id; over HTTP as many requests on the client's connection
pool); where that is one there is no round, its jobs go alone (one at a time a round gains
nothing and adds its own steps). Each is converted through the resilience layer as a lone job's
unit, with whatever profile the server's tools select; a thread that finishes one starts the
next at once. Meanwhile the round's own thread (the task's) stores the finished results in
groups, each group one transaction (one commit, one wait for the disk), each result under its
own fence, and, for up to ``DOCLANE_ROUND_MAX_S`` after the round started, claims more jobs
like them as room frees (in the same transaction as the group it follows), so the threads do
not idle through a claim, a commit or Celery's hand-off between rounds. A round never holds
more than ``DOCLANE_ROUND_MAX_DOCS`` jobs at once (claimed and not yet stored): what a killed
worker leaves to the reconciler.

Each job stays its own: its own claim, attempt, lease (kept by its own keeper on the process's
timer thread), journal, cancel scope and outcome. A cancel reaches only that job's call; a
failure is that job's retry or failure; a fence that no longer matches loses only that job's
results. A worker killed mid-round leaves its unstored jobs running with leases that lapse: the
reconciler requeues them, and since every write is fenced by its attempt nothing is stored
twice; a requeued job has been tried, so it goes alone next time (only never-tried jobs share a
round).

A job of the round that ends retrying rings its queue for when it is due; the outcome of the
round's lead goes back to the drain.

docling-mcp's directory tool (:mod:`.batching`) is a different bargain: one call for many
documents, which a server without concurrency needs, at the price of proving each result's key.
Where it applies (the server offers it and shares its cache folder) it is tried first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Protocol

from errors import CallTimeout, DatabaseUnavailable
from pipeline.jobs.model import Job
from pipeline.processing.attempt import Attempt
from pipeline.processing.failures import FailurePolicy, ring_when_due
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.runner import Claim
from pipeline.processing.settings import ProcessingSettings
from pipeline.profiles.base import Conversion
from pipeline.queues import SMALL_BELOW_BYTES, Publisher
from pipeline.store.attempts import Attempts
from pipeline.store.refusals import ResultFormatsRefused
from pipeline.support.logs import job_context
from pipeline.support.tracing import job_span, jobs_span

log = logging.getLogger("doclane.processor")

#: A converted document's results wait at most this long for others to share their commit
#: (they go sooner when half the round's room is converted, or when nothing else is in flight).
STORE_WITHIN_S = 0.2


class AttemptSteps(Protocol):
    """The lone job's steps, as the lone runner runs them (``LoneRunner``)."""

    def begin(self, job: Job) -> Attempt: ...

    def convert(self, attempt: Attempt) -> Conversion | Outcome: ...

    def store_results(self, attempt: Attempt, write: Callable[[], bool]) -> Outcome: ...

    def fail(self, attempt: Attempt, exc: Exception) -> Outcome: ...


@dataclass
class _Member:
    attempt: Attempt
    #: The claim's lead (its outcome goes back to the drain, which rings for its retry).
    lead: bool = False
    conversion: Conversion | None = None
    outcome: Outcome | None = None
    converted_at: float = 0.0


@dataclass
class _Round:
    """One round's state, kept by the round's own thread."""

    key: Job  # whose queue, profile, options and formats the round's claims match
    grow_until: float
    may_grow: bool
    members: list[_Member] = field(default_factory=list)
    in_flight: dict[Future[Conversion | Outcome], _Member] = field(default_factory=dict)
    converted: list[_Member] = field(default_factory=list)

    @property
    def held(self) -> int:
        return len(self.in_flight) + len(self.converted)


@dataclass(kw_only=True, eq=False)
class RoundRunner:
    """Claims rounds and runs them, continuously (see the module docstring)."""

    store: Attempts
    steps: AttemptSteps
    failures: FailurePolicy
    settings: ProcessingSettings
    publisher: Publisher
    worker_id: str
    #: How many conversions the process's servers run at once, asked before each round
    #: (:mod:`.concurrency`).
    concurrency: Callable[[], int]
    _threads: ThreadPoolExecutor | None = field(default=None, init=False)
    _thread_count: int = field(default=0, init=False)

    @property
    def room(self) -> int:
        """The most jobs a round holds at once (claimed and not yet stored): 1, no round at
        all, where the process's servers run one conversion at a time. Side by side is what a
        round is for; one at a time it only adds its own steps, and through one docling-mcp a
        round of 8 ran 0.91-0.99x the direct calls where jobs alone ran 1.02x
        (docs/benchmarks.md, *Rounds fitted to the server*)."""
        if self.settings.round_max_docs <= 1 or self.concurrency() <= 1:
            return 1
        return self.settings.round_max_docs

    def may_lead(self, job: Job) -> bool:
        return (
            self.room > 1
            and job.attempt == 1
            and job.source_kind.value == "file"
            and job.size_bytes is not None
            and job.size_bytes < SMALL_BELOW_BYTES
        )

    def claim_companions(self, lead: Job, limit: int | None = None) -> list[Job]:
        """Up to ``limit`` (the round's room but one) due jobs that can share ``lead``'s round."""
        return self.store.claim_round(
            lead,
            self.worker_id,
            self.settings.lease_s,
            limit=self.room - 1 if limit is None else limit,
            small_below=SMALL_BELOW_BYTES,
        )

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None

    # ---- one round ---------------------------------------------------------------------------
    def run(self, claim: Claim) -> Outcome:
        """The round of the claim's lead and its companions, grown while it may; the lead's
        outcome."""
        lead, companions = claim.job, claim.companions
        jobs = [lead, *companions]
        now = time.monotonic()
        round_ = _Round(
            key=jobs[0],
            grow_until=now + self.settings.round_max_s,
            # a claim that came back short found no more to take
            may_grow=len(companions) >= self.room - 1,
        )
        log.info("round of %d document(s) led by %s", len(jobs), lead.id)
        try:
            self._fit_threads()
            self._start(round_, jobs, lead)
            self._keep_going(round_)
        except Exception:  # the task's soft time limit: what is converted is stored
            self._cancel_all(round_)
            self._settle(round_, list(round_.in_flight), stopped=True)
            self._store(round_)
        except BaseException:  # the process is stopping: nothing more is written
            self._cancel_all(round_)
            raise
        finally:
            for member in round_.members:
                member.attempt.keeper.stop()
        led = [m for m in round_.members if m.lead]
        assert led and led[0].outcome is not None
        return led[0].outcome

    def _start(self, round_: _Round, jobs: list[Job], lead: Job | None) -> None:
        threads = self._threads
        assert threads is not None, "a round fits its threads first"
        for job in jobs:
            member = _Member(self.steps.begin(job), lead=job is lead)
            round_.members.append(member)
            round_.in_flight[threads.submit(self._convert_one, member.attempt)] = member

    def _keep_going(self, round_: _Round) -> None:
        """Until every job of the round has its outcome: settle what the threads finish, store
        the converted in groups, and claim more while the round may grow."""
        group = max(1, self.room // 2)
        while round_.in_flight or round_.converted:
            if round_.in_flight:
                timeout = None
                if round_.converted:
                    oldest = round_.converted[0].converted_at
                    timeout = max(0.0, oldest + STORE_WITHIN_S - time.monotonic())
                done, _ = wait(round_.in_flight, timeout=timeout, return_when=FIRST_COMPLETED)
                self._settle(round_, list(done), stopped=False)
            converted = round_.converted
            if converted and (
                len(converted) >= group
                or not round_.in_flight
                or time.monotonic() >= converted[0].converted_at + STORE_WITHIN_S
            ):  # with the store, as many more as its room takes (one commit for both)
                room = self.room - len(round_.in_flight)
                self._store(round_, more=room if room >= group and self._grows(round_) else 0)
            elif round_.held <= self.room - group and self._grows(round_):
                self._grow(round_, self.room - round_.held)

    @staticmethod
    def _grows(round_: _Round) -> bool:
        """Whether the round may still take more jobs (for DOCLANE_ROUND_MAX_S, and while its
        claims come back full)."""
        if round_.may_grow and time.monotonic() >= round_.grow_until:
            round_.may_grow = False
        return round_.may_grow

    def _grow(self, round_: _Round, wanted: int) -> None:
        """Up to ``wanted`` more jobs like the round's."""
        try:
            more = self.claim_companions(round_.key, wanted)
        except DatabaseUnavailable as exc:  # the round finishes what it holds
            log.warning("cannot claim more for the round: %s", exc)
            more = []
        self._took(round_, more, wanted)

    def _took(self, round_: _Round, more: list[Job], wanted: int) -> None:
        round_.may_grow = len(more) == wanted  # a claim that came back short found no more
        if more:
            self._start(round_, more, None)

    def _cancel_all(self, round_: _Round) -> None:
        for member in round_.in_flight.values():
            member.attempt.scope.cancel("the round reached its time limit")
        wait(round_.in_flight)

    def _convert_one(self, attempt: Attempt) -> Conversion | Outcome:
        job = attempt.job
        with (
            job_context(str(job.id), job.attempt),
            job_span("doclane.job.attempt", job.id, job.trace_context, attempt=job.attempt),
        ):
            attempt.journal.hold_from_now()
            return self.steps.convert(attempt)

    def _settle(
        self, round_: _Round, done: list[Future[Conversion | Outcome]], *, stopped: bool
    ) -> None:
        """What the threads finished: a conversion waits to be stored, an outcome is final.
        ``stopped``: the round reached its time limit, and a call it withdrew is a timeout."""
        now = time.monotonic()
        for future in done:
            member = round_.in_flight.pop(future)
            result = future.result()
            if isinstance(result, Outcome):
                timed_out = result.kind is OutcomeKind.LOST and not member.attempt.keeper.lost
                if stopped and timed_out:
                    limit = CallTimeout("the round reached the time limit of its size tier")
                    result = self.steps.fail(member.attempt, limit)
                self._finish(member, result)
            else:
                member.conversion, member.converted_at = result, now
                round_.converted.append(member)

    def _finish(self, member: _Member, outcome: Outcome) -> None:
        member.outcome = outcome
        member.attempt.keeper.stop()
        if not member.lead:
            ring_when_due(self.publisher, member.attempt.job, outcome)

    def _store(self, round_: _Round, *, more: int = 0) -> None:
        """The converted members' results in one transaction, each under its own fence, and
        with ``more``, up to that many more jobs claimed in the same transaction.

        They stay the round's converted until stored: a time limit that interrupts the store
        stores them again (a fence that no longer matches then says they were stored)."""
        done = round_.converted
        if not done:
            return
        ends = [m.attempt.journal.results(m.conversion) for m in done if m.conversion]

        def write() -> tuple[list[bool], list[Job]]:
            if not more:
                return self.store.finish_together(ends), []
            return self.store.finish_then_claim(
                ends,
                round_.key,
                self.worker_id,
                self.settings.lease_s,
                limit=more,
                small_below=SMALL_BELOW_BYTES,
            )

        jobs = [m.attempt.job for m in done]
        traced = jobs_span("doclane.round.store", [(j.id, j.trace_context) for j in jobs])
        try:
            with traced:
                stored, taken = self.failures.retry_while_database_down(
                    write, "storing a round's results"
                )
        except DatabaseUnavailable as exc:
            round_.converted = []
            for member in done:
                self._finish(member, self.steps.fail(member.attempt, exc))
            return
        except ResultFormatsRefused:  # one member's results are not its formats: find whose, alone
            round_.converted = []
            for member in done:
                self._finish(member, self._store_alone(member))
            return
        round_.converted = []
        if more:
            self._took(round_, taken, more)
        for member, ours in zip(done, stored, strict=True):
            self._finish(member, self.steps.store_results(member.attempt, _already(ours)))

    def _store_alone(self, member: _Member) -> Outcome:
        conversion, journal = member.conversion, member.attempt.journal
        assert conversion is not None
        return self.steps.store_results(member.attempt, lambda: journal.finish(conversion))

    def _fit_threads(self) -> None:
        """The process's round threads, one per conversion its servers run at once: made by
        the first round (after the fork, in a worker), and again by a round that finds that
        number changed (a server that did not answer before; the last round's threads are
        idle by then)."""
        count = self.concurrency()
        if self._threads is None or count != self._thread_count:
            self.close()
            self._threads = ThreadPoolExecutor(
                max_workers=count, thread_name_prefix="doclane-round"
            )
            self._thread_count = count


def _already(stored: bool) -> Callable[[], bool]:
    """A write that was already made (in the round's one transaction), and what it found."""
    return lambda: stored
