"""Small documents in batches: one directory call for several jobs, each under its own fence.

A worker that claimed a small file job (its *lead*) takes more due jobs that can share the call
(same queue, profile, options and formats, never tried before, small), up to
``DOCLANE_BATCH_MAX_DOCS`` and ``DOCLANE_BATCH_MAX_BYTES``. Each keeps its own claim, attempt,
lease and fencing.

Whether the servers can take a batch at all is asked once per process, before any companion is
claimed (:class:`ServerBatching`): a server without the directory tool (docling-rs-mcp), or one
whose saved JSON this worker cannot read, never sees a batch, so no job is claimed into one only
to be given back with an attempt number spent and a note of a batch that never ran.

The documents go to the server as a folder it can read (``inbox/batch-<lead>-<attempt>/``,
through the path map), each hard-linked under its own name (names are unique in a batch), and
the folder is removed afterwards, or swept by the reconciler when the worker dies first. The
batch profile proves which key came from which file (:mod:`pipeline.profiles.docling_batch`).

What each job comes to:
- converted and proven: its results are stored under its own fence;
- skipped by the server, or not provable: given back uncharged and converted alone (a job
  tried once is never batched again), so a file the server cannot convert costs its own
  conversion, not its batch's, and gets its own error;
- the batch call failed (timeout, server down, open circuits): every job gets the outcome it
  would have had alone (retryable errors charged, an open circuit not).
- cancelled while in the batch: nothing is written for it; the others go on.
Companions that end up retrying ring their queue for when they are due; the lead's outcome
goes back to the drain like any outcome.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from errors import CallCancelled, ControlFlow, DatabaseUnavailable, classify
from pipeline.jobs.model import Job, Stage
from pipeline.mcp.client import McpClient
from pipeline.mcp.timeouts import CallTimeouts
from pipeline.processing.failures import FailurePolicy, lost, ring_when_due
from pipeline.processing.journal import AttemptJournal, AttemptLost, engine_of, job_masker
from pipeline.processing.lease import LeaseKeeper, keep_lease
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.runner import Claim
from pipeline.processing.settings import ProcessingSettings
from pipeline.processing.sourcing import PreparedSource, SourcePreparer
from pipeline.profiles.base import Conversion, McpCallRecord
from pipeline.profiles.docling_batch import BatchConversion, BatchMember, DoclingBatchProfile
from pipeline.profiles.docling_mcp import DoclingMcpProfile
from pipeline.profiles.selection import available_profiles
from pipeline.profiles.settings import ProfileSettings
from pipeline.queues import SMALL_BELOW_BYTES, Publisher
from pipeline.resilience.retry import RetryRecord
from pipeline.sources.pathmap import PathMap
from pipeline.store.attempts import Attempts, BatchLimits

T = TypeVar("T")
#: Formats whose Docling JSON is many times the file: larger ones than
#: ``DOCLANE_BATCH_MAX_TABLE_BYTES`` are converted alone.
TABLE_SUFFIXES = frozenset({".csv", ".xlsx"})
log = logging.getLogger("doclane.processor")


class UnitRunner(Protocol):
    """The resilience layer as the processor uses it (``pipeline.resilience.facade.Resilient``)."""

    def run(
        self,
        unit: Callable[[McpClient], T],
        *,
        label: str = ...,
        record: RetryRecord | None = ...,
    ) -> T: ...

    def refusing_for(self) -> float:
        """Seconds every server's circuit will still refuse a unit (0: none known)."""
        ...

    def on_each_server(self, look: Callable[[McpClient], T]) -> Sequence[T | None]:
        """``look`` once on every server (None where it got no answer): what a round's
        concurrency is fitted to (:mod:`.concurrency`), and whether batches can be had."""
        ...


class NotBatchable(ControlFlow):
    """The server offers no directory tool, or this worker cannot read what it saves.

    Raised inside the batch's unit and caught around it, to send every document alone: control
    flow, so the retry and breaker layers the unit passes through neither retry it nor count
    it."""


def batch_profile(
    client: McpClient, profile_settings: ProfileSettings, path_map: PathMap
) -> DoclingBatchProfile:
    """The batch profile for the server behind ``client`` (NotBatchable: none there)."""
    names = frozenset(tool.name for tool in client.tools())
    if not DoclingBatchProfile.fits(names):
        raise NotBatchable("the server offers no directory tool")
    found = available_profiles(names, profile_settings, path_map.to_worker_path)
    for profile in found:
        if isinstance(profile, DoclingMcpProfile) and profile.reads_saved_json:
            return DoclingBatchProfile(profile)
    raise NotBatchable("this worker cannot read the Docling JSON the server saves")


class ServerBatching:
    """Whether every server of the process takes a batch, asked once per process.

    Each server is asked its tools (the registry its first conversion lists anyway), through its
    breaker and without retry, the first time a job could lead a batch. A server that answers
    decides for good: batches only when every server offers the directory tool and saves JSON
    this worker reads (a unit may land on any of them). A server that does not answer (down,
    its circuit open) leaves the question open: no batch until it answers, asked again at the
    next job that could lead one."""

    def __init__(
        self, servers: UnitRunner, profile_settings: ProfileSettings, path_map: PathMap
    ) -> None:
        self._servers = servers
        self._profile_settings = profile_settings
        self._path_map = path_map
        self._decided: bool | None = None

    @property
    def decided(self) -> bool | None:
        """The decision once made (None: not yet)."""
        return self._decided

    def __call__(self) -> bool:
        if self._decided is not None:
            return self._decided
        answers = self._servers.on_each_server(self._why_not)
        reasons = [reason for reason in answers if reason]
        if reasons:
            self._decided = False
            log.info("no batches: %s", reasons[0])
        elif None not in answers:
            self._decided = True
            log.info("batches: every server offers the directory tool")
        return bool(self._decided)

    def _why_not(self, client: McpClient) -> str:
        """Why the server takes no batch ('' when it takes one)."""
        try:
            batch_profile(client, self._profile_settings, self._path_map)
        except NotBatchable as exc:
            return exc.message
        return ""


@dataclass
class _Member:
    job: Job
    keeper: LeaseKeeper
    journal: AttemptJournal
    source: PreparedSource | None = None
    outcome: Outcome | None = None
    place: int = 0

    @property
    def name(self) -> str:
        assert self.source is not None and self.source.info.path is not None
        return Path(self.source.info.path).name


@dataclass
class _Batch:
    id: str
    members: list[_Member]
    folder: Path
    active: list[_Member] = field(default_factory=list)


@dataclass(kw_only=True, eq=False)
class BatchRunner:
    """Claims companions for a lead job and converts them together (see the module docstring)."""

    store: Attempts
    runner: UnitRunner
    failures: FailurePolicy
    sources: SourcePreparer
    settings: ProcessingSettings
    profile_settings: ProfileSettings
    path_map: PathMap
    inbox_dir: Path
    publisher: Publisher
    timeouts: CallTimeouts
    worker_id: str
    #: The origin of the batch's last call, which each member's trail records.
    _origin: str = field(default="", init=False)
    #: Whether the servers take a batch at all, asked before any companion is claimed.
    servers_batch: ServerBatching = field(init=False)
    #: What may share a call, which the claim of companions applies.
    limits: BatchLimits = field(init=False)

    def __post_init__(self) -> None:
        self.servers_batch = ServerBatching(self.runner, self.profile_settings, self.path_map)
        self.limits = BatchLimits(
            max_bytes=self.settings.batch_max_bytes,
            table_suffixes=TABLE_SUFFIXES,
            table_max_bytes=self.settings.batch_max_table_bytes,
        )

    # ---- who may share a call ----------------------------------------------------------------
    @property
    def possible(self) -> bool:
        """Whether any job may lead a batch here (else small jobs go straight to rounds)."""
        return (
            self.settings.batch_max_docs > 1
            and self.profile_settings.server_cache_dir is not None
            and self.profile_settings.profile in ("auto", "docling-mcp")
        )

    def may_lead(self, job: Job) -> bool:
        return (
            self.possible
            and job.attempt == 1
            and not job.options  # the directory tool takes none
            and job.source_kind.value == "file"
            and job.size_bytes is not None
            and job.size_bytes < min(SMALL_BELOW_BYTES, self.settings.batch_max_bytes)
            and self.limits.admits(job.source_uri, job.size_bytes)
            and self.servers_batch()  # last: it may ask the servers, once
        )

    def claim_companions(self, lead: Job) -> list[Job]:
        return self.store.claim_companions(
            lead,
            self.worker_id,
            self.settings.lease_s,
            limit=self.settings.batch_max_docs - 1,
            small_below=min(SMALL_BELOW_BYTES, self.settings.batch_max_bytes),
            batch=self.limits,
        )

    # ---- one batch -----------------------------------------------------------------------------
    def run(self, claim: Claim) -> Outcome:
        """The batch of the claim's job and its companions; the job's outcome."""
        lead, companions = claim.lead(), claim.companions
        batch_id = f"batch-{lead.id}-{lead.attempt}"
        members = [self._member(job, place) for place, job in enumerate([lead, *companions])]
        batch = _Batch(batch_id, members, self.inbox_dir / batch_id)
        log.info("batch %s: %d document(s)", batch_id, len(members))
        try:
            self._prepare(batch)
            if batch.active:
                self._convert(batch)
        finally:
            shutil.rmtree(batch.folder, ignore_errors=True)
            for member in members:
                member.keeper.stop()
                if member.source is not None:
                    member.source.discard()
        for member in members[1:]:
            ring_when_due(self.publisher, member.job, member.outcome)
        assert members[0].outcome is not None
        return members[0].outcome

    def _member(self, job: Job, place: int) -> _Member:
        keeper = keep_lease(self.store, job, self.settings)
        return _Member(job, keeper, AttemptJournal(self.store, job, keeper), place=place)

    def _prepare(self, batch: _Batch) -> None:
        """Check each source again and link it into the batch folder; E1xx fails it alone."""
        batch.folder.mkdir(parents=True, exist_ok=True)
        for member in batch.members:
            try:
                member.journal.stage(Stage.VALIDATING)
                member.source = self.sources.prepare(member.job, member.journal)
                _link(Path(member.source.info.path or ""), batch.folder / member.name)
            except AttemptLost as gone:
                member.outcome = lost(member.job, gone.message)
            except DatabaseUnavailable as exc:
                member.outcome = self.failures.give_back_uncharged(member.job, exc)
            except Exception as exc:
                error = job_masker(member.job).error(classify(exc))
                member.outcome = self.failures.failure(member.job, error, reached_server=False)
            else:
                batch.active.append(member)

    def _convert(self, batch: _Batch) -> None:
        """The batch's one call, and what it comes to for each member."""
        unit, tries = self._unit(batch), RetryRecord()
        try:
            converted = self.runner.run(unit, label=batch.id, record=tries)
        except NotBatchable as exc:
            log.info("batch %s: %s; every document goes alone", batch.id, exc.message)
            for member in batch.active:
                self._release(member, f"not batched: {exc.message}")
            return
        except CallCancelled as stopped:
            for member in batch.active:
                member.outcome = lost(member.job, stopped.message)
            return
        except Exception as exc:
            for member in batch.active:
                error = job_masker(member.job).error(classify(exc))
                member.outcome = self.failures.failure(
                    member.job, error, reached_server=tries.reached_server
                )
            return
        self._settle(batch, converted)

    def _unit(self, batch: _Batch) -> Callable[[McpClient], BatchConversion]:
        """The unit of work the resilience layer runs on each try: the batch's folder converted
        through the directory tool, each call reported to the trail of the members it concerns."""
        active = batch.active
        folder = self.path_map.to_server_path(str(batch.folder))
        total = sum(m.source.info.size_bytes or 0 for m in active if m.source is not None)
        deadline = self.timeouts.for_size(total) + self.settings.batch_per_doc_s * len(active)
        by_name = {m.name: m for m in active}
        with os.scandir(batch.folder) as entries:  # the order the server lists it in, likely
            listing = [entry.name for entry in entries]

        def report(record: McpCallRecord, name: str | None) -> None:
            for member in [by_name[name]] if name is not None else active:
                if not member.keeper.lost:
                    member.journal.call(self._origin, record)

        def unit(client: McpClient) -> BatchConversion:
            self._origin = client.origin
            profile = self._profile(client)
            for member in active:
                self._stage(member, Stage.CONVERTING, client.origin)
            members = [BatchMember(m.name, m.source.info.size_bytes or 0, m.source.info.sha256)
                       for m in active if m.source is not None]  # fmt: skip
            converted = profile.convert(
                client,
                folder,
                members,
                active[0].job.formats,
                report,
                timeout=deadline,
                listing=listing,
            )
            engine = engine_of(client)  # each result names it, as a lone job's results do
            for conversion in converted.converted.values():
                conversion.engine = engine
            return converted

        return unit

    def _settle(self, batch: _Batch, converted: BatchConversion) -> None:
        """Each member's outcome once the call returned: stored, given back, or lost."""
        log.info(
            "batch %s: %d key(s) for %d document(s), %d proven (%s by elimination)",
            batch.id,
            converted.keys,
            len(batch.active),
            len(converted.converted),
            converted.eliminated or "none",
        )
        for member in batch.active:
            conversion = converted.converted.get(member.name)
            if member.keeper.lost:
                member.outcome = lost(member.job, "cancelled or taken during the batch")
            elif conversion is None:
                self._release(member, "the batch gave no result it could prove; converting alone")
            else:
                # The history and the counters (stats, /metrics) know a batch from this note,
                # written only for a document whose result the call gave.
                note = {"batch": batch.id, "size": len(batch.active), "place": member.place}
                self._note(member, "converted in a batch", **note)
                member.outcome = self._store(member, conversion)

    # ---- per member ----------------------------------------------------------------------------
    def _profile(self, client: McpClient) -> DoclingBatchProfile:
        """Asked again on each try: the server behind an origin may have changed since."""
        return batch_profile(client, self.profile_settings, self.path_map)

    @staticmethod
    def _stage(member: _Member, stage: Stage, origin: str | None = None) -> None:
        # A lost member's keeper knows; nothing is written for it from here on.
        with contextlib.suppress(AttemptLost):
            member.journal.stage(stage, origin=origin)

    def _store(self, member: _Member, conversion: Conversion) -> Outcome:
        """The results under the member's own fence, with the note a lone job's results get
        (the profile and engine: the database gives each result the engine from it)."""
        job = member.job
        try:
            self._stage(member, Stage.STORING)
            stored = self.failures.retry_while_database_down(
                lambda: member.journal.finish(conversion), "storing the results"
            )
        except DatabaseUnavailable as exc:
            return self.failures.give_back_uncharged(job, exc)
        if not stored:
            return lost(job, "storing")
        log.info("batch member %s succeeded (%s)", job.id, conversion.profile)
        return Outcome(OutcomeKind.SUCCEEDED, job.id, job.attempt)

    def _release(self, member: _Member, reason: str) -> None:
        job = member.job
        try:
            released = self.store.release(job.id, job.attempt, reason=reason)
        except DatabaseUnavailable as exc:
            member.outcome = self.failures.give_back_uncharged(job, exc)
            return
        if not released:
            member.outcome = lost(job, "releasing")
            return
        member.outcome = Outcome(
            OutcomeKind.RETRY, job.id, job.attempt, message=reason, countdown_s=0.0,
            attempt_spent=False,
        )  # fmt: skip

    def _note(self, member: _Member, text: str, **detail: Any) -> None:
        try:
            self.store.add_note(member.job.id, member.job.attempt, text, **detail)
        except DatabaseUnavailable as exc:
            log.warning("could not note the batch: %s", exc)


def _link(source: Path, target: Path) -> None:
    """Place ``source`` in the batch folder without copying where the filesystem allows."""
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed: a copy does the same job
        shutil.copyfile(source, target)
