"""The admin views, as a Python API: what ``doclane stats|jobs|status|retry`` and the HTTP API
(``doclane api``) both call, so the CLI and HTTP answer alike.

::

    from pipeline.admin import collect_stats, list_jobs, job_detail, retry_failed
    stats = collect_stats(store, fleet, settings=read_settings().admin,
                          resilience=read_settings().resilience)
    stats.jobs["succeeded"], stats.failures[0].code, stats.unreachable
    list_jobs(store, JobFilter(state=JobState.FAILED, error_code="E101", limit=50))
    retry_failed(store, publisher, error_code="E303", since=parse_since("1h"))

``store`` is a :class:`pipeline.store.AdminStore`; ``fleet`` the broker's side
(:class:`Fleet`, implemented by ``workers.fleet.BrokerFleet``). Names are imported on first use
(:mod:`pipeline.support.lazy`): ``doclane stats`` loads the stats, not job submission and its
HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from errors import JobNotFound
    from pipeline.store import AdminStore, JobFilter

    from .fleet import (
        BreakerState,
        CountedFleet,
        Fleet,
        QueueDepth,
        RedisUnreachable,
        read_breakers,
        read_live_workers,
    )
    from .heartbeats import WorkerInfo
    from .jobs import (
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
    from .settings import AdminSettings
    from .stats import Failures, Stats, Throughput, TierTimes, Window, collect_stats, run_parts

__getattr__ = lazy.exports(
    __name__,
    {
        "AdminSettings": ".settings",
        "BreakerState": ".fleet",
        "CountedFleet": ".fleet",
        "ErrorInfo": ".jobs",
        "Failures": ".stats",
        "Fleet": ".fleet",
        "JobDetail": ".jobs",
        "QueueDepth": ".fleet",
        "RedisUnreachable": ".fleet",
        "RetryOutcome": ".jobs",
        "Stats": ".stats",
        "Throughput": ".stats",
        "TierTimes": ".stats",
        "Window": ".stats",
        "WorkerInfo": ".heartbeats",
        "WrongState": ".jobs",
        "cancel_job": ".jobs",
        "collect_stats": ".stats",
        "error_info": ".jobs",
        "job_detail": ".jobs",
        "list_jobs": ".jobs",
        "parse_since": ".jobs",
        "read_breakers": ".fleet",
        "read_live_workers": ".fleet",
        "retry_failed": ".jobs",
        "retry_job": ".jobs",
        "run_parts": ".stats",
        "JobNotFound": "errors",
        "AdminStore": "pipeline.store",
        "JobFilter": "pipeline.store",
    },
)

__all__ = [
    "AdminSettings",
    "AdminStore",
    "BreakerState",
    "CountedFleet",
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
    "parse_since",
    "read_breakers",
    "read_live_workers",
    "retry_failed",
    "retry_job",
    "run_parts",
]
