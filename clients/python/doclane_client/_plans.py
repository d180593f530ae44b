"""The operations of the API, each written once as a plan (see :mod:`doclane_client._core`).

Submitting: sources go in one JSON request per ``SOURCES_PER_REQUEST``; local files are uploaded
one per request (the API takes one document per multipart form), each refused file recorded
like a refused source, so both answer with one :class:`Submission`. Listing pages by keyset: each
page's ``next_before`` is the next request's ``before``. Waiting polls, by
submission where several pending jobs share one (one request for up to a thousand jobs), and
backs off while nothing ends.
"""

from __future__ import annotations

import mimetypes
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, TypeAlias
from uuid import UUID

import httpx

from doclane_client._core import Core, Emit, Feed, Plan, Send, Sleep
from doclane_client.errors import InvalidInput, JobFailed, NotFound, WaitTimeout
from doclane_client.models import AcceptedOut, Job, JobDetail, JobList, JobState, RejectedOut

#: The API takes up to 10,000 sources a request; smaller requests answer sooner.
SOURCES_PER_REQUEST = 1000
#: Sent with every submission: the API answers a retried one with the first one's jobs.
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: The API's largest page (``limit``).
MAX_PAGE = 1000
TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class Submitted(AcceptedOut):
    """One accepted source: its job (``id``), and the submission it came in with."""

    submission_id: str

    @property
    def id(self) -> str:
        return self.job_id


class Submission(list[Submitted]):
    """The jobs a submission made (a list: ``jobs += dl.submit_sources(...)`` adds another's),
    with the sources refused (``rejected``, each with its catalog code) and how many were
    answered by an existing conversion (``duplicates``)."""

    def __init__(self, accepted: Iterable[Submitted] = (), rejected: Iterable[RejectedOut] = ()):
        super().__init__(accepted)
        self.rejected: list[RejectedOut] = list(rejected)

    @property
    def duplicates(self) -> int:
        return sum(1 for job in self if job.deduplicated)

    def __iadd__(self, other: Iterable[Submitted]) -> Submission:  # type: ignore[override]
        self.extend(other)
        self.rejected.extend(getattr(other, "rejected", ()))
        return self

    def __add__(self, other: Iterable[Submitted]) -> Submission:  # type: ignore[override]
        return _joined(self, other)

    def raise_for_rejected(self) -> None:
        """Raise the first refusal as :class:`InvalidInput` (its code), if any source was."""
        if self.rejected:
            first = self.rejected[0]
            raise InvalidInput(first.code, f"{first.source}: {first.message}", detail=self.rejected)


def _joined(left: Submission, right: Iterable[Submitted]) -> Submission:
    joined = Submission(left, left.rejected)
    joined += right
    return joined


#: What names a job: its id, or anything with an ``id`` (a Job, a Submitted).
JobRef: TypeAlias = str | UUID | Job | Submitted
PathOrSource: TypeAlias = str | PathLike[str]


def job_id(ref: JobRef) -> str:
    return str(ref.id if isinstance(ref, Job | Submitted) else ref)


def _form(to: str | Sequence[str]) -> str:
    return to if isinstance(to, str) else ",".join(to)


@dataclass(frozen=True)
class Asked:
    """What every submission asks besides its sources (the API's fields)."""

    to: str | Sequence[str] = "md"
    priority: int = 0
    options: dict[str, Any] | None = None
    webhook: str | None = None
    #: Whose jobs (a token of no tenant only; a tenant's token submits as its own tenant).
    tenant: str | None = None

    def body(self, sources: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"sources": sources, "to": _form(self.to)}
        body["priority"] = self.priority
        if self.options:
            body["options"] = self.options
        if self.webhook:
            body["webhook"] = self.webhook
        if self.tenant:
            body["tenant"] = self.tenant
        return body

    def fields(self) -> dict[str, str]:
        fields = {"to": _form(self.to), "priority": str(self.priority)}
        for name, value in (self.options or {}).items():
            fields[name] = str(value).lower() if isinstance(value, bool) else str(value)
        if self.webhook:
            fields["webhook"] = self.webhook
        if self.tenant:
            fields["tenant"] = self.tenant
        return fields


def _submission(answer: dict[str, Any]) -> Submission:
    sid = answer["submission_id"]
    accepted = [Submitted(**row, submission_id=sid) for row in answer["accepted"]]
    return Submission(accepted, [RejectedOut(**row) for row in answer["rejected"]])


def submit_sources(core: Core, sources: Iterable[str], asked: Asked) -> Plan[Submission]:
    """Sources the server fetches or reads (URLs, s3://, its own paths), in JSON requests.
    Refused sources are in ``rejected``; a request whose every source is refused raises."""
    every = [str(s) for s in sources]
    done = Submission()
    for start in range(0, len(every), SOURCES_PER_REQUEST):
        body = asked.body(every[start : start + SOURCES_PER_REQUEST])
        # One key a request, kept across its retries: a retry after an answer lost on the way
        # back gets the first submission's answer, not a second submission.
        keyed = {IDEMPOTENCY_HEADER: uuid.uuid4().hex}
        send = Send("POST", "/v1/jobs", json=body, headers=keyed)
        answer = yield from core.json(send, idempotent=True)
        done += _submission(answer)
    return done


def submit_files(core: Core, paths: Iterable[PathOrSource], asked: Asked) -> Plan[Submission]:
    """Local files, uploaded one per request. A file the API refuses (its type, its size, empty)
    is recorded in ``rejected`` and the others go on; when every file is refused, the first
    refusal is raised, as the API does for sources."""
    done = Submission()
    refusals: list[InvalidInput] = []
    for path in map(Path, paths):
        with path.open("rb") as file:
            keyed = {IDEMPOTENCY_HEADER: uuid.uuid4().hex}  # the same for each retry of it

            def send(file: Any = file, path: Path = path, keyed: dict[str, str] = keyed) -> Send:
                file.seek(0)
                kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                upload = {"file": (path.name, file, kind)}
                return Send("POST", "/v1/jobs", data=asked.fields(), files=upload, headers=keyed)

            try:
                response = yield from core.call(send, idempotent=True)
            except InvalidInput as refused:
                refusals.append(refused)
                done.rejected.append(RejectedOut(source=str(path), code=refused.code,
                                                 message=refused.message))  # fmt: skip
                continue
        answer = _submission(response.json())
        for job in answer:
            job.source = job.uri = str(path)  # the API names an upload by its file name only
        done += answer
    if refusals and not done:
        raise refusals[0]
    return done


def submit_any(core: Core, items: Iterable[PathOrSource], asked: Asked) -> Plan[Submission]:
    """Local files uploaded, the rest sent as sources (a URL, s3://, a path on the server)."""
    files: list[PathOrSource] = []
    sources: list[str] = []
    for item in items:
        text = str(item)
        (files if "://" not in text and Path(text).is_file() else sources).append(item)  # type: ignore[arg-type]
    done = Submission()
    if files:
        done += yield from submit_files(core, files, asked)
    if sources:
        done += yield from submit_sources(core, sources, asked)
    return done


def get_job(core: Core, ref: JobRef) -> Plan[JobDetail]:
    answer = yield from core.json(Send("GET", f"/v1/jobs/{job_id(ref)}"))
    return JobDetail.model_validate(answer)


def cancel(core: Core, ref: JobRef) -> Plan[Job]:
    send = Send("POST", f"/v1/jobs/{job_id(ref)}/cancel")
    answer = yield from core.json(send, idempotent=True)  # cancelling twice changes nothing
    return Job.model_validate(answer["job"])


def list_jobs(core: Core, filters: dict[str, Any], limit: int | None, page_size: int) -> Feed[Job]:
    """Jobs matching ``filters``, newest first, a page at a time, ``limit`` in all (None: all).

    Each page's answer names the next (``next_before``, sent back as ``before``); the listing
    ends when it names none, or when ``limit`` jobs were listed."""
    params = {k: str(v) for k, v in filters.items() if v is not None}
    left = limit
    cursor: str | None = None
    while left is None or left > 0:
        size = min(page_size, MAX_PAGE, left if left is not None else MAX_PAGE)
        page_params = {**params, "limit": size}
        if cursor is not None:
            page_params["before"] = cursor
        answer = yield from core.json(Send("GET", "/v1/jobs", params=page_params))
        page = JobList.model_validate(answer)
        for job in page.jobs:
            yield Emit(job)
        if left is not None:
            left -= len(page.jobs)
        cursor = page.next_before
        if cursor is None:
            return


def result(core: Core, ref: JobRef, fmt: str, *, stream: bool = False) -> Plan[httpx.Response]:
    """The answer carrying a result (streamed: unread). A job that ended without results is
    :class:`JobFailed` rather than a bare 404."""
    send = Send("GET", f"/v1/jobs/{job_id(ref)}/result/{fmt}", stream=stream)
    try:
        response: httpx.Response = yield from core.call(lambda: send)
        return response
    except NotFound as missing:
        if missing.status == 410:
            raise
        detail = yield from get_job(core, ref)
        if detail.job.state in (JobState.FAILED, JobState.CANCELLED):
            job = detail.job
            failed = JobFailed(str(job.id), job.state.value, job.error_code, job.error_message)
            raise failed from missing
        raise


@dataclass
class Polling:
    """How ``wait`` polls: ``initial_s`` after a poll where something ended, growing by
    ``factor`` to ``max_s`` while nothing does."""

    initial_s: float = 0.2
    factor: float = 1.5
    max_s: float = 5.0


@dataclass
class Waiter:
    """The jobs still awaited, and the polling that finds which of them ended."""

    refs: Iterable[JobRef]
    timeout: float | None
    polling: Polling = field(default_factory=Polling)
    pending: dict[str, str | None] = field(init=False)
    delay: float = field(init=False)
    deadline: float | None = field(init=False)

    def __post_init__(self) -> None:
        self.pending = {job_id(r): _submission_of(r) for r in self.refs}
        self.delay = self.polling.initial_s
        self.deadline = None if self.timeout is None else time.monotonic() + self.timeout

    def ended(self, core: Core) -> Plan[list[Job]]:
        """The next jobs to end (at least one, unless none is pending), polling until some do;
        :class:`WaitTimeout` past the deadline."""
        while self.pending:
            ended = [job for job in (yield from self._poll(core)) if job.state in TERMINAL]
            for job in ended:
                self.pending.pop(str(job.id), None)
            if ended:
                self.delay = self.polling.initial_s
                return ended
            pause = self.delay
            self.delay = min(self.delay * self.polling.factor, self.polling.max_s)
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(sorted(self.pending), float(self.timeout or 0))
                pause = min(pause, left)
            yield Sleep(pause)
        return []

    def _poll(self, core: Core) -> Plan[list[Job]]:
        """Every pending job's row: a list request per submission with several pending jobs,
        a job request for the rest (and for any the list did not hold)."""
        by_submission: dict[str | None, list[str]] = {}
        for jid, sid in self.pending.items():
            by_submission.setdefault(sid, []).append(jid)
        seen: list[Job] = []
        alone: list[str] = by_submission.pop(None, [])
        for sid, ids in by_submission.items():
            if len(ids) == 1:
                alone += ids
                continue
            params = {"submission": sid, "limit": MAX_PAGE}
            answer = yield from core.json(Send("GET", "/v1/jobs", params=params))
            listed = {str(job.id): job for job in JobList.model_validate(answer).jobs}
            seen += [listed[jid] for jid in ids if jid in listed]
            alone += [jid for jid in ids if jid not in listed]
        for jid in alone:
            seen.append((yield from get_job(core, jid)).job)
        return seen


def _submission_of(ref: JobRef) -> str | None:
    found = getattr(ref, "submission_id", None)
    return str(found) if found else None


def wait(core: Core, waiter: Waiter) -> Feed[Job]:
    while waiter.pending:
        for job in (yield from waiter.ended(core)):
            yield Emit(job)
