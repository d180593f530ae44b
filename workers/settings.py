"""The settings tree a doclane Celery app carries, and the task limits derived from the size
tiers (the workers' own settings are the ``worker`` section of ``pipeline.settings``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.queues import SizeTier, tier_of_queue

if TYPE_CHECKING:
    from pipeline.jobs.settings import ReconcileSettings
    from pipeline.mcp.settings import McpSettings
    from pipeline.processing.settings import ProcessingSettings
    from pipeline.resilience.settings import ResilienceSettings
    from pipeline.settings.tree import Settings
    from pipeline.settings.workers import WorkerSettings
    from pipeline.sources.settings import SourceSettings

#: Where ``workers.app.create_app`` keeps the tree in the app's configuration.
SETTINGS_KEY = "doclane_settings"


def settings_of(app: Any) -> Settings:
    """The settings tree ``app`` (a Celery app made by ``create_app``) was made with: the worker
    process read it once, and each part it starts (runtime, heartbeat, publisher) takes its
    sections from there."""
    tree: Settings = app.conf[SETTINGS_KEY]
    return tree


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
        self._drain_s = processing.round_max_s

    @classmethod
    def from_settings(cls, settings: Settings) -> TimeLimits:
        return cls(
            mcp=settings.mcp,
            resilience=settings.resilience,
            sources=settings.sources,
            processing=settings.processing,
            reconcile=settings.reconcile,
            worker=settings.worker,
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

    def for_drain(self, queue: str) -> tuple[float, float]:
        """(soft, hard) for a drain of ``queue``: a job started as the drain's time budget
        ends (a round, which grows for as long again) still gets its tier's whole limits."""
        soft, hard = self.for_queue(queue)
        extra = 2 * self._drain_s
        return round(soft + extra, 1), round(hard + extra, 1)

    def visibility_timeout(self) -> float:
        """Above the longest hard limit plus the longest countdown, with a margin."""
        floor = float(
            int(
                max(self.hard(t) for t in self._timeouts)
                + 2 * self._drain_s
                + self._longest_countdown
                + 300
            )
        )
        if self._visibility_override is not None:
            return max(self._visibility_override, floor)
        return floor
