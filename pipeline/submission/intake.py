"""Submitting documents: sources in, one job id (or a rejection with its E1xx code) per source out.

::

    from pipeline.jobs.formats import Formats
    from pipeline.jobs.request import SubmissionRequest
    from pipeline.submission.intake import enqueue
    asked = SubmissionRequest(["inbox/", "https://example.org/a.docx"], Formats.parse("md,json"))
    submission = enqueue(asked, store=store, publisher=publisher)
    for item in submission.accepted: print(item.job_id, item.queue)
    for item in submission.rejected: print(item.source, item.code, item.message)

The request comes parsed (its formats and options were checked at the CLI's, the API's or the
console's door); what only this process's settings can judge is judged first, before any job is
made: the webhook's address, and whether a configured server can give what is asked
(:mod:`.door`, E305). Each source is validated before it becomes a job (``pipeline.sources``); a
rejection never stops the others. Jobs are made a chunk at a time as the sources are validated
and hashed (64 sources, then twice as many each time, up to 500): each chunk's rows are
committed in one transaction, then the queues it filled are rung (a bell says "drain this
queue", :func:`pipeline.queues.bells_for`; a later chunk's bell only once the queue's last is
half a second old, and the submission's end rings for the rest), and a bell the broker refuses
leaves queued rows
that the reconciler rings for later. Workers start on the first chunk while the rest is still being
hashed (a thousand files used to keep every worker waiting for the whole folder; a million, for
minutes). A submission the database drops halfway says how many of its jobs were made before.
Queues follow the size tier, so one huge document does not hold up a thousand small ones; a URL
(size unknown until fetched) goes large.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from errors import DatabaseUnavailable, InputError, NothingToConvert, TenantQueueFull, UnknownTenant
from pipeline.jobs.model import CreatedJob, NewJob, SourceKind
from pipeline.jobs.request import SubmissionRequest
from pipeline.jobs.settings import SubmitSettings
from pipeline.queues import Publisher, bells_for, queue_for, ring
from pipeline.sources.addresses import AddressPolicy
from pipeline.sources.expansion import expand
from pipeline.sources.models import Candidate, Rejected
from pipeline.sources.settings import SourceSettings
from pipeline.store.outbox import WebhookOutbox
from pipeline.store.store import JobStore
from pipeline.submission.door import Door, admit
from pipeline.submission.slicing import pages_refusal, slices_for
from pipeline.support.secrets import Masker, process_masker
from pipeline.support.tracing import JobTraces
from pipeline.webhooks.sender import check_webhook_url
from pipeline.webhooks.settings import WebhookSettings

log = logging.getLogger("doclane.enqueue")

#: Sources per chunk of jobs: the first chunk is small, so that workers start at once; each next
#: one twice the last, up to one publish batch (one COPY and one broker round trip per chunk).
CHUNK_FIRST = 64
CHUNK_MAX = 500
#: A later chunk rings a queue it filled only when the queue's last bell is this old (else the
#: bell waits for a later chunk, or the submission's end): the drains its first bells started
#: take every job while there is work, so a bell a chunk mostly woke no one and cost the
#: submitter a publish (10 ms) and a worker an empty claim; one that ended between two chunks
#: waits at most this long.
RING_AGAIN_S = 0.5


@dataclass(frozen=True, slots=True)
class Accepted:
    """A source that is (or already was) a job."""

    source: str
    uri: str
    job_id: UUID
    queue: str
    deduplicated: bool = False
    #: False when the broker refused the message; the reconciler will publish it.
    published: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "uri": self.uri,
            "job_id": str(self.job_id),
            "queue": self.queue,
            "deduplicated": self.deduplicated,
            "published": self.published,
        }


@dataclass(slots=True)
class Submission:
    #: Every job of this submission carries it: ``doclane jobs --submission ID`` lists them.
    id: UUID = field(default_factory=uuid4)
    accepted: list[Accepted] = field(default_factory=list)
    #: Sources that did not become jobs, as they may be shown (a URL's secrets masked).
    rejected: list[Rejected] = field(default_factory=list)
    #: Files in folders and glob matches passed over (hidden, not a document type), by reason.
    skipped: dict[str, int] = field(default_factory=dict)
    #: Sources named twice (or reached twice through folders and links), listed once.
    duplicates: int = 0
    #: Jobs whose message the broker refused: queued, waiting for the reconciler.
    publish_failures: dict[UUID, str] = field(default_factory=dict)

    @property
    def job_ids(self) -> list[UUID]:
        return [item.job_id for item in self.accepted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "submission_id": str(self.id),
            "accepted": [item.to_dict() for item in self.accepted],
            "rejected": [item.to_dict() for item in self.rejected],
            "skipped": dict(self.skipped),
            "duplicates": self.duplicates,
            "publish_failures": {str(k): v for k, v in self.publish_failures.items()},
        }


def enqueue(
    request: SubmissionRequest,
    *,
    publisher: Publisher,
    store: JobStore | None = None,
    source_settings: SourceSettings | None = None,
    submit_settings: SubmitSettings | None = None,
    webhook_settings: WebhookSettings | None = None,
    cwd: Path | None = None,
    masker: Masker | None = None,
    door: Door | None = None,
) -> Submission:
    """Validate the request's sources, create their jobs, commit, then publish one message per
    new job.

    ``store`` defaults to a short-lived one from the environment's settings. A deduplicated
    source (same content, profile, options and formats as a succeeded job, and with
    ``DOCLANE_DEDUP_ENGINE`` results of that engine) returns that job and publishes nothing.
    Sources are kept and reported as ``masker`` shows them (by default the process's,
    ``process_masker()``): a URL's secrets masked.

    Before any job is made the whole submission is refused when ``door`` (by default the
    process's, :func:`~.door.admit`) finds that no configured server can give its
    formats with its options (E305), when its webhook (default ``DOCLANE_WEBHOOK_URL``,
    told when each new job ends, :mod:`pipeline.webhooks`) is an address the policy refuses
    (E104), or when its tenant does not exist (E116); and after, when its sources named no
    document at all (E119: empty folders, and no source refused either). A source past its
    tenant's quota of queued jobs (``max_queued``) is refused alone with E115, like a source
    that fails its checks: the sources before it within the quota are jobs.
    """
    sources_cfg = source_settings or SourceSettings.from_environment()
    webhook = (
        request.webhook_url or (webhook_settings or WebhookSettings.from_environment()).webhook_url
    )
    if webhook:
        check_webhook_url(webhook, AddressPolicy(allow_private=sources_cfg.allow_private_urls))
    admit(request.formats, request.options, door)
    shown = (masker or process_masker()).text
    submit = submit_settings or SubmitSettings.from_environment()
    submission = Submission()
    own_store = store is None
    job_store = store if store is not None else JobStore()
    chunks = _Chunks(
        submission,
        job_store,
        publisher,
        dedup=request.dedup,
        dedup_engine=submit.dedup_engine.strip() or None,
        wake_bells=submit.wake_bells,
        new_job=lambda c: _new_job(
            c, request, submit, shown=shown, webhook_url=webhook, submission_id=submission.id
        ),
        refusal=lambda c: pages_refusal(
            c.info.path if c.info.kind == "file" else None, request.options
        ),
        shown=shown,
    )
    try:
        if job_store.tenants.get(request.tenant) is None:
            raise UnknownTenant(
                f"no tenant {request.tenant!r} (doclane tenants list shows them; an operator "
                "makes one with doclane tenants set)",
                detail={"tenant": request.tenant},
            )
        expansion = expand(
            [str(s) for s in request.sources], sources_cfg, cwd=cwd, on_item=chunks.add
        )
        chunks.flush()
    finally:
        chunks.ring_waiting()  # whatever ended the submission, its jobs are rung for
        if own_store:
            job_store.close()
    submission.skipped = dict(expansion.skipped)
    submission.duplicates = expansion.duplicates
    if not submission.accepted and not submission.rejected:
        raise _nothing_to_convert(request, submission, shown)
    _log_submission(submission)
    return submission


def _nothing_to_convert(
    request: SubmissionRequest, submission: Submission, shown: Callable[[str], str]
) -> NothingToConvert:
    """E119: folders (or globs, or ``s3://`` prefixes) that held no document, and no source
    refused either: a submitter who named the wrong folder is told so, not handed an empty
    success. The sources as they may be shown (a secret in an address masked)."""
    named = ", ".join(shown(str(source)) for source in request.sources)
    passed = ", ".join(f"{n} {why}" for why, n in sorted(submission.skipped.items()))
    return NothingToConvert(
        f"no document to convert in {named}" + (f" (skipped: {passed})" if passed else ""),
        detail={"skipped": dict(submission.skipped), "duplicates": submission.duplicates},
    )


def _log_submission(submission: Submission) -> None:
    if submission.publish_failures:
        log.warning(
            "%d job(s) stay queued for the reconciler: publish failed (first: %s)",
            len(submission.publish_failures),
            next(iter(submission.publish_failures.values())),
        )
    log.info(
        "submitted %d source(s): %d new job(s), %d deduplicated, %d refused",
        len(submission.accepted) + len(submission.rejected),
        sum(1 for a in submission.accepted if not a.deduplicated),
        sum(1 for a in submission.accepted if a.deduplicated),
        len(submission.rejected),
    )


@dataclass(eq=False)
class _Chunks:
    """Sources turned into jobs a chunk at a time: committed, then published (see the module
    docstring). The broker, once found down, is not tried again for the later chunks."""

    submission: Submission
    store: JobStore
    publisher: Publisher
    _: KW_ONLY
    dedup: bool
    dedup_engine: str | None
    #: A submission rings a queue up to this many times in all, then once again for later
    #: chunks that fill it (a drain that found the queue empty between two chunks has ended),
    #: at most every ``RING_AGAIN_S`` and at its end.
    wake_bells: int
    new_job: Callable[[Candidate], NewJob]
    refusal: Callable[[Candidate], InputError | None]
    shown: Callable[[str], str]
    size: int = field(default=CHUNK_FIRST, init=False)
    pending: list[Candidate] = field(default_factory=list, init=False)
    broker_down: str | None = field(default=None, init=False)
    clock: Callable[[], float] = time.monotonic
    #: Bells rung so far, by queue, and when the last.
    rung: dict[str, int] = field(default_factory=dict, init=False)
    rung_at: dict[str, float] = field(default_factory=dict, init=False)
    #: Jobs (and their top priority) of chunks whose bell waits, by queue.
    unrung: dict[str, tuple[int, int]] = field(default_factory=dict, init=False)

    def add(self, item: Candidate | Rejected) -> None:
        if not isinstance(item, Rejected):
            refused = self.refusal(item)
            if refused is not None:
                item = Rejected(item.source, refused)
        if isinstance(item, Rejected):
            self.submission.rejected.append(item.masked(self.shown))
            return
        self.pending.append(item)
        if len(self.pending) >= self.size:
            self.flush()
            self.size = min(self.size * 2, CHUNK_MAX)

    def flush(self) -> None:
        """Make the pending sources jobs, and ring for them when it is useful."""
        candidates, self.pending = self.pending, []
        if not candidates:
            return
        traces = JobTraces([self.new_job(c) for c in candidates])
        specs = traces.specs
        try:
            admitted = self.store.submissions.admit(
                specs, dedup=self.dedup, dedup_engine=self.dedup_engine
            )
        except DatabaseUnavailable as exc:
            before = len(self.submission.accepted)
            if before:  # the chunks before this one are jobs, and are being converted
                exc.reword(
                    f"{exc.message} ({before} job(s) of this submission were made before it "
                    "and will be converted; the rest were not submitted)"
                )
                exc.detail = {**(exc.detail or {}), "jobs_made_before": before}
            raise
        over = [c for c, made in zip(candidates, admitted, strict=True) if made is None]
        for candidate in over:
            self.submission.rejected.append(_over_quota(self.shown(candidate.source), specs[0]))
        if over:
            kept = [i for i, made in enumerate(admitted) if made is not None]
            candidates = [candidates[i] for i in kept]
            specs = [specs[i] for i in kept]
        created = [made for made in admitted if made is not None]
        if not created:
            return
        filled: dict[str, tuple[int, int]] = {}
        for spec, made in zip(specs, created, strict=True):
            if not made.deduplicated:
                jobs, top = filled.get(spec.queue, (0, spec.priority))
                filled[spec.queue] = (jobs + len(made.slice_ids or (1,)), max(top, spec.priority))
        refused = self._ring(filled)
        failed = {
            job_id: refused[spec.queue]
            for spec, made in zip(specs, created, strict=True)
            if spec.queue in refused and not made.deduplicated
            for job_id in made.slice_ids or (made.job_id,)
        }
        self.submission.publish_failures.update(failed)
        traces.end([made.job_id if made else None for made in admitted])
        self._tell_webhook(specs, created)
        for candidate, spec, made in zip(candidates, specs, created, strict=True):
            self.submission.accepted.append(
                Accepted(
                    source=self.shown(candidate.source),
                    uri=spec.source_uri,
                    job_id=made.job_id,
                    queue=spec.queue,
                    deduplicated=made.deduplicated,
                    published=not made.deduplicated and spec.queue not in refused,
                )
            )

    def _tell_webhook(self, specs: list[NewJob], created: list[CreatedJob]) -> None:
        """A deduplicated job has ended already: its end will not call this submission's
        webhook, so the event is written now."""
        hits = [made.job_id for made in created if made.deduplicated]
        url = specs[0].webhook_url  # one submission, one webhook: every spec names it
        if hits and url:
            WebhookOutbox(self.store.pool).tell_finished(hits, url)

    def ring_waiting(self) -> None:
        """The bells that waited for a later chunk, rung at the submission's end (a bell the
        broker refuses is the reconciler's to ring again, as any)."""
        if self.unrung:
            self._ring({}, last=True)

    def _ring(self, filled: dict[str, tuple[int, int]], *, last: bool = False) -> dict[str, str]:
        """Ring each queue this chunk filled, as often as is useful (see ``wake_bells``); the
        queues the broker refused (their jobs wait in PostgreSQL for the reconciler's bell),
        with why."""
        if self.broker_down is not None:
            return dict.fromkeys(filled, self.broker_down)
        for queue, (jobs, top) in filled.items():
            before, high = self.unrung.get(queue, (0, top))
            self.unrung[queue] = (before + jobs, max(high, top))
        now = self.clock()
        due = {
            queue: waiting
            for queue, waiting in self.unrung.items()
            if last
            or self.rung.get(queue, 0) < self.wake_bells
            or now - self.rung_at.get(queue, now) >= RING_AGAIN_S
        }
        wanted = {
            queue: (min(jobs, max(1, self.wake_bells - self.rung.get(queue, 0))), top)
            for queue, (jobs, top) in due.items()
        }
        refused = ring(self.publisher, bells_for(wanted, self.wake_bells))
        for queue, (bells, _) in wanted.items():
            del self.unrung[queue]
            if queue not in refused:
                self.rung[queue] = self.rung.get(queue, 0) + max(bells, 0)
                self.rung_at[queue] = now
        if refused and len(refused) == len(wanted):  # every bell tried was refused
            self.broker_down = "not tried: the broker refused the bells before it"
        return refused


def _over_quota(source: str, spec: NewJob) -> Rejected:
    """A source refused because its tenant's queue is full (E115)."""
    return Rejected(
        source,
        TenantQueueFull(
            f"tenant {spec.tenant!r} has as many jobs queued as its quota (max_queued) allows; "
            "submit this document again once some have started"
        ),
    )


def _new_job(
    candidate: Candidate,
    request: SubmissionRequest,
    submit: SubmitSettings,
    *,
    shown: Callable[[str], str],
    webhook_url: str | None,
    submission_id: UUID,
) -> NewJob:
    info = candidate.info
    masked = shown(info.uri) if info.kind == "url" else info.uri
    return NewJob(
        source_kind=SourceKind(info.kind),
        source_uri=masked,
        source_fetch_uri=info.uri if masked != info.uri else None,
        queue=queue_for(info.size_bytes),
        formats=request.formats,
        profile=submit.profile,
        options=request.options.stored(),
        size_bytes=info.size_bytes,
        content_sha256=info.sha256,
        priority=request.priority,
        tenant=request.tenant,
        max_attempts=submit.max_attempts,
        webhook_url=webhook_url,
        submission_id=submission_id,
        slices=slices_for(
            info.path if info.kind == "file" else None,
            formats=request.formats,
            options=request.options,
            slice_pages=submit.slice_pages,
        ),
    )
