"""Settings of the Celery workers: the broker, the queues, and the limits derived from tiers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from pipeline.queues import ALL_QUEUES, SizeTier, tier_of_queue

if TYPE_CHECKING:  # the packages themselves: a publisher (doclane submit) needs none of them
    from pipeline.mcp import McpSettings
    from pipeline.processing import ProcessingSettings
    from pipeline.reconciler.sweeps import ReconcileSettings
    from pipeline.resilience import ResilienceSettings
    from pipeline.sources import SourceSettings

DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DOCLANE_", env_file=".env", extra="ignore", frozen=True, env_ignore_empty=True
    )

    #: Redis by default; ``amqp://user:pass@host:5672//`` for RabbitMQ.
    broker_url: str = DEFAULT_BROKER_URL
    #: Queues a worker consumes, comma-separated in the environment.
    worker_queues: Annotated[tuple[str, ...], NoDecode] = ALL_QUEUES
    #: Worker processes per ``doclane worker`` (``--concurrency``); each converts one job at a
    #: time with its own MCP client.
    worker_concurrency: int = Field(default=2, ge=1)
    #: Run beat (the reconciler's clock) inside ``doclane worker``. Several beats are harmless
    #: (a pass is idempotent) but wasteful: large fleets run one ``doclane beat`` instead.
    worker_beat: bool = True
    #: Extra seconds a task may run past its soft limit before it is killed.
    time_limit_grace_s: float = Field(default=30.0, ge=0)
    #: Override the computed broker visibility timeout (Redis: when an unacked message is
    #: redelivered). Must stay above the longest hard limit plus the longest countdown.
    visibility_timeout_s: float | None = Field(default=None, gt=0)
    #: Recycle a worker process after this many tasks (bounds slow leaks); 0 = never.
    max_tasks_per_child: int = Field(default=0, ge=0)
    #: How often a worker node writes its heartbeat into Redis (DOCLANE_REDIS_URL), where
    #: ``doclane stats``, the API and /metrics read the live workers in one round trip; a node
    #: whose heartbeat is three beats old counts as gone. Each node counts the queues' messages
    #: before each beat, and ``doclane stats`` shows the freshest count instead of asking the
    #: broker.
    worker_heartbeat_s: float = Field(default=5.0, gt=0)
    #: Redis only: kombu's emulation of acknowledgements, which copies every delivered message
    #: into an "unacked" hash and deletes it on ack (two Redis round trips per job) so that a
    #: dead worker's messages come back after the visibility timeout. Off: a worker holds its
    #: unacknowledged messages in memory (a pool process that dies still gives its message
    #: back), and what a whole worker held when it died is brought back by the reconciler from
    #: the database (expired leases, stale queued and retrying jobs), as every lost message is.
    redis_ack_emulation: bool = False

    @field_validator("worker_queues", mode="before")
    @classmethod
    def _split_queues(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(q.strip() for q in value.split(",") if q.strip())
        return value


def load_worker_settings(**overrides: Any) -> WorkerSettings:
    return WorkerSettings(**overrides)


class TimeLimits:
    """Soft and hard task limits per size tier, and the broker visibility timeout above them.

    One attempt makes up to three calls in the common case (convert, export markdown, save
    Docling JSON), each retried ``retry_max_tries`` times with backoff, after a download bounded
    by its own deadline; the soft limit allows for all three at the tier's timeout on every
    try. A re-conversion after an evicted key is not budgeted: should it overrun, the attempt
    ends with E303 and is retried. The limits are a backstop: the MCP client's per-call
    timeout is what normally ends a slow call.

    RabbitMQ enforces its own ``consumer_timeout`` (30 minutes by default) on unacknowledged
    deliveries: set it above :meth:`visibility_timeout` on the broker, or large-tier jobs that
    run long get their channel closed and their messages redelivered (harmless, the claim is
    guarded, but wasteful).
    """

    #: Calls one attempt budgets for per try: convert, export, save.
    CALLS_PER_TRY = 3

    def __init__(
        self,
        *,
        mcp: McpSettings,
        resilience: ResilienceSettings,
        sources: SourceSettings,
        processing: ProcessingSettings,
        reconcile: ReconcileSettings,
        worker: WorkerSettings,
    ) -> None:
        self._timeouts: dict[SizeTier, float] = {
            "small": mcp.timeout_small_s,
            "medium": mcp.timeout_medium_s,
            "large": mcp.timeout_large_s,
        }
        self._tries = resilience.retry_max_tries
        self._backoff_total = sum(
            min(resilience.retry_base_s * 2.0**n, resilience.retry_max_s)
            for n in range(self._tries - 1)
        )
        self._download_s = sources.download_timeout_s
        self._grace = worker.time_limit_grace_s
        self._longest_countdown = max(
            processing.job_retry_max_s,
            processing.circuit_retry_s,
            processing.db_retry_s,
            resilience.breaker_reset_s,
            reconcile.reconcile_interval_s,
        )
        self._visibility_override = worker.visibility_timeout_s

    @classmethod
    def from_environment(cls, worker: WorkerSettings | None = None) -> TimeLimits:
        from pipeline.mcp import load_mcp_settings
        from pipeline.processing import load_processing_settings
        from pipeline.reconciler.sweeps import load_reconcile_settings
        from pipeline.resilience import load_resilience_settings
        from pipeline.sources import load_source_settings

        return cls(
            mcp=load_mcp_settings(),
            resilience=load_resilience_settings(),
            sources=load_source_settings(),
            processing=load_processing_settings(),
            reconcile=load_reconcile_settings(),
            worker=worker or load_worker_settings(),
        )

    def soft(self, tier: SizeTier) -> float:
        per_try = self.CALLS_PER_TRY * self._timeouts[tier]
        return round(self._download_s + self._tries * per_try + self._backoff_total + 30.0, 1)

    def hard(self, tier: SizeTier) -> float:
        return round(self.soft(tier) + self._grace, 1)

    def for_queue(self, queue: str) -> tuple[float, float]:
        """(soft, hard) for a job queue (``doclane.small`` ...); unknown queues get large."""
        tier = tier_of_queue(queue)
        return self.soft(tier), self.hard(tier)

    def visibility_timeout(self) -> float:
        """Above the longest hard limit plus the longest countdown, with a margin."""
        floor = float(
            int(max(self.hard(t) for t in self._timeouts) + self._longest_countdown + 300)
        )
        if self._visibility_override is not None:
            return max(self._visibility_override, floor)
        return floor
