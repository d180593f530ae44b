"""The API's models, generated from its OpenAPI document: do not edit by hand.

Written by ``clients/python/scripts/generate_models.py`` (API version 1); the test
``tests/client/test_openapi_drift.py`` fails when this file and the API's document differ.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ApiModel(BaseModel):
    """Every model: fields a newer API adds are kept, not refused."""

    model_config = ConfigDict(extra="allow")


class AcceptedOut(ApiModel):
    source: str
    uri: str
    job_id: str
    queue: str
    deduplicated: bool
    published: bool


class ApiError(ApiModel):
    code: str
    title: str
    message: str
    action: str = ""
    retryable: bool = False
    detail: Any = None


class AuditEntry(ApiModel):
    """One action: who (a token's name, or a JWT's subject with its issuer), when, from where,
    what (``action`` on ``target``), how it ended (``ok``, or an error code or HTTP status), and
    what else says it (a submission's job count). Never a secret."""

    id: int | None = None
    at: datetime | None = None
    actor: str
    issuer: str | None = None
    address: str | None = None
    action: str
    target: str | None = None
    outcome: str
    detail: dict[str, Any] = Field(default_factory=lambda: {})


class AuditPage(ApiModel):
    entries: list[AuditEntry]
    next_before: int | None = None


class Batches(ApiModel):
    """Small documents converted together (one directory call each), over the last hour."""

    batches: int
    documents: int
    mean_size: float | None
    largest: int


class BreakerState(ApiModel):
    origin: str
    state: str
    failures: int
    fail_max: int
    retry_after_s: float


class ErrorInfo(ApiModel):
    code: str
    title: str
    message: str | None
    user_message: str
    action: str
    retryable: bool


class ErrorResponse(ApiModel):
    error: ApiError


class EventKind(StrEnum):
    STATE_CHANGE = "state_change"
    MCP_CALL = "mcp_call"
    NOTE = "note"


class Failures(ApiModel):
    code: str
    title: str
    message: str
    action: str
    last_hour: int
    all_time: int


class Health(ApiModel):
    ok: bool
    parts: dict[str, str] = Field(default_factory=lambda: {})


class JobState(StrEnum):
    QUEUED = "queued"
    WAITING = "waiting"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SourceKind(StrEnum):
    FILE = "file"
    URL = "url"


class Stage(StrEnum):
    """Where a running attempt is, shown by ``doclane status`` as progress; a failed (or
    retrying) job's stage is the step its attempt failed in."""

    FETCHING = "fetching"
    VALIDATING = "validating"
    CONVERTING = "converting"
    EXPORTING = "exporting"
    STORING = "storing"


class Job(ApiModel):
    """A row of ``jobs``: the whole truth about one job at one moment."""

    id: UUID
    source_kind: SourceKind
    source_uri: str
    size_bytes: int | None
    content_sha256: str | None
    profile: str
    options: dict[str, Any]
    formats: list[str]
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
    submission_id: UUID | None = None
    parent_id: UUID | None = None
    slices_total: int | None = None
    slices_done: int = 0


class JobEvent(ApiModel):
    """One line of a job's audit trail (``job_events``)."""

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


class ResultInfo(ApiModel):
    """One stored result, without its (possibly huge) content."""

    job_id: UUID
    format: str
    attempt: int
    size_bytes: int
    engine: str | None = None
    created_at: datetime


class JobDetail(ApiModel):
    """A job, its error explained from the catalog, its results and its history."""

    job: Job
    error: ErrorInfo | None
    results: list[ResultInfo]
    events: list[JobEvent]


class JobList(ApiModel):
    jobs: list[Job]
    next_before: str | None = None


class JobOut(ApiModel):
    job: Job


class QueueBacklog(ApiModel):
    """A job queue's queued jobs, counted by PostgreSQL (the queue itself)."""

    queue: str
    queued: int
    tenants: dict[str, int] = Field(default_factory=lambda: {})


class QueueDepth(ApiModel):
    queue: str
    waiting: int
    age_s: float = 0.0
    counted_by: str | None = None


class RejectedOut(ApiModel):
    source: str
    code: str
    message: str


class RetryOutcome(ApiModel):
    """One retried job: published again (waiting jobs), resubmitted as a new job, or refused."""

    retry_of: UUID
    action: str
    job_id: UUID | None = None
    code: str | None = None
    message: str | None = None


class Tenant(ApiModel):
    """A row of ``tenants``: its share of the fleet and its limits (None: no limit)."""

    name: str
    weight: int = 1
    max_running: int | None = None
    max_queued: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class TenantFigures(ApiModel):
    """A tenant and how its jobs stand now: queued and running right now, and what finished over
    the last ``window_minutes`` (``doclane tenants list``, ``doclane stats``, ``GET /v1/stats``)."""

    tenant: Tenant
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    window_minutes: int = 60
    per_minute: float = 0.0


class Window(ApiModel):
    """Jobs that finished within a window, and the rate that makes."""

    minutes: int
    finished: int
    succeeded: int
    failed: int
    cancelled: int
    per_minute: float


class Throughput(ApiModel):
    last_1m: Window
    last_5m: Window
    last_60m: Window
    per_minute: list[int]


class TierTimes(ApiModel):
    """Seconds from a job's first claim to its success, over the percentile window."""

    tier: str
    jobs: int
    p50_s: float | None
    p95_s: float | None


class WorkerInfo(ApiModel):
    """A worker node (``doclane worker``), as its latest heartbeat tells it."""

    name: str
    concurrency: int | None = None
    tasks_done: int | None = None
    queues: list[str] = Field(default_factory=lambda: [])


class Stats(ApiModel):
    """What ``doclane stats --json`` prints and ``GET /v1/stats`` answers."""

    at: datetime
    jobs: dict[str, int] | None = None
    throughput: Throughput | None = None
    conversion_window_s: float
    conversion_time: list[TierTimes] = Field(default_factory=lambda: [])
    batches_last_hour: Batches | None = None
    failures: list[Failures] = Field(default_factory=lambda: [])
    breakers: list[BreakerState] | None = None
    queues: list[QueueBacklog] | None = None
    bells: list[QueueDepth] | None = None
    workers: list[WorkerInfo] | None = None
    webhooks: dict[str, int] | None = None
    tenants: list[TenantFigures] | None = None
    unreachable: dict[str, str] = Field(default_factory=lambda: {})


class StoredToken(ApiModel):
    """A token kept in the database, as ``doclane tokens list`` shows it: never the secret."""

    name: str
    role: str
    tenant: str | None = None
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class SubmitResponse(ApiModel):
    submission_id: str
    tenant: str = "default"
    accepted: list[AcceptedOut]
    rejected: list[RejectedOut]
    skipped: dict[str, int]
    duplicates: int
    publish_failures: dict[str, str]


class TokenCreated(ApiModel):
    token: str
    stored: StoredToken


class TokenList(ApiModel):
    tokens: list[StoredToken]


class TokenOut(ApiModel):
    stored: StoredToken


class TokenRequest(ApiModel):
    name: str
    role: str
    tenant: str | None = None
    expires: str | None = None
