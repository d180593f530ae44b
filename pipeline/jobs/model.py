"""Jobs as the rest of doclane sees them: what a submitter asks for, and what the store keeps.

These are plain values: the job store (``pipeline.store``) reads and writes them, the workers and
the CLI pass them around, and ``model_dump(mode="json")`` is what ``--json`` prints. The rules of
the state machine are not here: they live in the database (migration 0003), which refuses an
illegal transition whoever asks for it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from pipeline.jobs.formats import DEFAULT_FORMATS, Formats
from pipeline.queues import JOB_PRIORITY_MAX, JOB_PRIORITY_MIN


class JobState(StrEnum):
    QUEUED = "queued"
    #: A document split into slices: no worker holds it; the database finishes it when its
    #: slices are done (migration 0017).
    WAITING = "waiting"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


#: States a job never leaves.
TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

#: The legal transitions, mirrored from the database's ``job_state_transitions`` table (migration
#: 0003) for readers and tests; the database, not this constant, is what enforces them.
LEGAL_TRANSITIONS: frozenset[tuple[JobState, JobState]] = frozenset(
    {
        (JobState.QUEUED, JobState.RUNNING),
        (JobState.QUEUED, JobState.CANCELLED),
        (JobState.QUEUED, JobState.FAILED),
        (JobState.QUEUED, JobState.WAITING),
        (JobState.WAITING, JobState.SUCCEEDED),
        (JobState.WAITING, JobState.FAILED),
        (JobState.WAITING, JobState.CANCELLED),
        (JobState.RUNNING, JobState.SUCCEEDED),
        (JobState.RUNNING, JobState.FAILED),
        (JobState.RUNNING, JobState.RETRYING),
        (JobState.RUNNING, JobState.QUEUED),
        (JobState.RUNNING, JobState.CANCELLED),
        (JobState.RETRYING, JobState.RUNNING),
        (JobState.RETRYING, JobState.QUEUED),
        (JobState.RETRYING, JobState.CANCELLED),
        (JobState.RETRYING, JobState.FAILED),
    }
)


class Stage(StrEnum):
    """Where a running attempt is, shown by ``doclane status`` as progress; a failed (or
    retrying) job's stage is the step its attempt failed in."""

    #: Downloading a URL or an ``s3://`` object into the attempt's scratch folder.
    FETCHING = "fetching"
    VALIDATING = "validating"
    CONVERTING = "converting"
    EXPORTING = "exporting"
    STORING = "storing"


class SourceKind(StrEnum):
    FILE = "file"
    URL = "url"


class EventKind(StrEnum):
    STATE_CHANGE = "state_change"
    MCP_CALL = "mcp_call"
    NOTE = "note"


class NewJob(BaseModel):
    """What a submitter asks for: one source, converted to some formats, on one queue.

    ``content_sha256`` and ``size_bytes`` are known for files at submission; for a URL they are
    learnt when the worker downloads it (``Attempts.record_source``). Dedup needs the hash.
    """

    model_config = ConfigDict(frozen=True)

    source_kind: SourceKind
    #: What everyone is shown: a URL's secrets masked (``X-Amz-Signature=***``).
    source_uri: str = Field(min_length=1)
    #: The whole URL when ``source_uri`` masks secrets; only the fetching worker reads it. Never
    #: dumped (``--json``) or printed (repr).
    source_fetch_uri: str | None = Field(default=None, min_length=1, exclude=True, repr=False)
    queue: str = Field(min_length=1)
    formats: Formats = DEFAULT_FORMATS
    profile: str = "auto"
    #: The job's conversion options in their stored form (``ConversionOptions.stored()``).
    options: dict[str, Any] = Field(default_factory=dict)
    size_bytes: int | None = Field(default=None, ge=0)
    content_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    priority: int = Field(default=0, ge=JOB_PRIORITY_MIN, le=JOB_PRIORITY_MAX)
    tenant: str = "default"
    max_attempts: int = Field(default=3, ge=1)
    #: Where the completion event goes (``pipeline.webhooks``); it may hold a token, so it is
    #: never dumped or printed, like ``source_fetch_uri``.
    webhook_url: str | None = Field(default=None, exclude=True, repr=False)
    #: The W3C trace context of the job's trace (``pipeline.support.tracing``; None when the
    #: submitter did not trace). Plumbing, not a value anyone is shown.
    trace_context: dict[str, str] | None = Field(default=None, exclude=True, repr=False)
    #: The submission this job came in with (one per ``enqueue``).
    submission_id: UUID | None = None
    #: Page runs (``"1-32"``, ``"33-64"``, ...) this document is converted as, one slice job
    #: each (:mod:`pipeline.submission.slicing`); empty: converted whole. Not part of dedup's
    #: key: the assembled result is the whole document's.
    slices: tuple[str, ...] = Field(default=(), exclude=True)


class Job(BaseModel):
    """A row of ``jobs``: the whole truth about one job at one moment."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    source_kind: SourceKind
    source_uri: str
    #: See :class:`NewJob`: the unmasked URL, excluded from every dump and repr.
    source_fetch_uri: str | None = Field(default=None, exclude=True, repr=False)
    size_bytes: int | None
    content_sha256: str | None
    profile: str
    options: dict[str, Any]
    formats: tuple[str, ...]
    queue: str
    priority: int
    tenant: str = "default"
    state: JobState
    stage: Stage | None
    attempt: int
    attempts_spent: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    next_attempt_at: datetime | None
    error_code: str | None
    error_message: str | None
    error_detail: dict[str, Any] | None
    server_origin: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    #: See :class:`NewJob`: excluded from every dump and repr.
    webhook_url: str | None = Field(default=None, exclude=True, repr=False)
    submission_id: UUID | None = None
    #: The job this one is a slice of (its page run in ``options["pages"]``), migration 0017.
    parent_id: UUID | None = None
    #: Slices this job was split into (None: converted whole), and how many have succeeded:
    #: a waiting job's progress.
    slices_total: int | None = None
    slices_done: int = 0
    #: See :class:`NewJob` (stored by migration 0018; a slice has its parent's).
    trace_context: dict[str, str] | None = Field(default=None, exclude=True, repr=False)

    @property
    def fetch_uri(self) -> str:
        """What the worker fetches: the whole URL (or the file path)."""
        return self.source_fetch_uri or self.source_uri

    @property
    def attempts_left(self) -> int:
        """Attempts still chargeable after the current one (a breaker refund gives one back)."""
        return max(self.max_attempts - self.attempts_spent, 0)


class CreatedJob(BaseModel):
    """The answer to one submission: the job that will carry it, new or a dedup hit."""

    model_config = ConfigDict(frozen=True)

    job_id: UUID
    deduplicated: bool = False
    #: The slice jobs a split document was made into, in page order (their messages are the
    #: ones to publish; the job itself waits for them).
    slice_ids: tuple[UUID, ...] = ()


class ResultInfo(BaseModel):
    """One stored result, without its (possibly huge) content."""

    model_config = ConfigDict(frozen=True)

    job_id: UUID
    format: str
    attempt: int
    size_bytes: int
    #: The engine that produced it ("docling-rs 2.52.7"); None when not recorded (migration 0013).
    engine: str | None = None
    created_at: datetime


class JobEvent(BaseModel):
    """One line of a job's audit trail (``job_events``)."""

    model_config = ConfigDict(frozen=True)

    id: int
    job_id: UUID
    attempt: int
    kind: EventKind
    from_state: JobState | None
    to_state: JobState | None
    tool: str | None
    duration_ms: float | None
    outcome: str | None
    error_code: str | None
    server_origin: str | None
    detail: dict[str, Any] | None
    at: datetime


class Cancellation(BaseModel):
    """A job that ``cancel`` stopped, and the state it was stopped in (running: its attempt
    notices at its next lease renewal and stops)."""

    model_config = ConfigDict(frozen=True)

    job: Job
    previous_state: JobState


class ExpiredLeases(BaseModel):
    """One reconciler sweep over expired leases: requeued jobs need a new message; failed ones
    had no attempts left."""

    model_config = ConfigDict(frozen=True)

    requeued: tuple[UUID, ...] = ()
    failed: tuple[UUID, ...] = ()
