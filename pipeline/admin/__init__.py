"""The admin views, as a Python API: what ``doclane stats|jobs|status|retry`` and the HTTP API
(``doclane api``) both call, so the CLI and HTTP answer alike.

::

    from pipeline.admin import collect_stats, list_jobs, job_detail, retry_failed
    stats = collect_stats(store, fleet, settings=load_admin_settings(),
                          resilience=load_resilience_settings())
    stats.jobs["succeeded"], stats.failures[0].code, stats.unreachable
    list_jobs(store, JobFilter(state=JobState.FAILED, error_code="E101", limit=50))
    retry_failed(store, publisher, error_code="E303", since=parse_since("1h"))

``store`` is a :class:`pipeline.store.AdminStore`; ``fleet`` the broker's side
(:class:`Fleet`, implemented by ``workers.fleet.CeleryFleet``).
"""

from __future__ import annotations

from errors import JobNotFound
from pipeline.admin.fleet import (
    BreakerState,
    Fleet,
    QueueDepth,
    RedisUnreachable,
    WorkerInfo,
    read_breakers,
)
from pipeline.admin.jobs import (
    ErrorInfo,
    JobDetail,
    RetryOutcome,
    WrongState,
    cancel_job,
    error_info,
    job_detail,
    list_jobs,
    parse_since,
    retry_failed,
    retry_job,
)
from pipeline.admin.settings import AdminSettings, load_admin_settings
from pipeline.admin.stats import (
    Failures,
    Stats,
    Throughput,
    TierTimes,
    Window,
    collect_stats,
    run_parts,
)
from pipeline.store import AdminStore, JobFilter

__all__ = [
    "AdminSettings",
    "AdminStore",
    "BreakerState",
    "ErrorInfo",
    "Failures",
    "Fleet",
    "JobDetail",
    "JobFilter",
    "JobNotFound",
    "QueueDepth",
    "RedisUnreachable",
    "RetryOutcome",
    "Stats",
    "Throughput",
    "TierTimes",
    "Window",
    "WorkerInfo",
    "WrongState",
    "cancel_job",
    "collect_stats",
    "error_info",
    "job_detail",
    "list_jobs",
    "load_admin_settings",
    "parse_since",
    "read_breakers",
    "retry_failed",
    "retry_job",
    "run_parts",
]
