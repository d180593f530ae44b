"""The admin views, as a Python API: what ``doclane stats|jobs|status|retry`` and the HTTP API
(``doclane api``) both call, so the CLI and HTTP answer alike.

::

    from pipeline.admin import collect_stats, list_jobs, job_detail, retry_failed
    stats = collect_stats(store, fleet, settings=read_settings().admin,
                          resilience=read_settings().resilience)
    stats.jobs["succeeded"], stats.failures[0].code, stats.unreachable
    jobs = TenantView(store, EVERY_TENANT)  # a tenant's caller: TenantView(store, its scope)
    list_jobs(jobs, JobFilter(state=JobState.FAILED, error_code="E101", limit=50))
    retry_failed(jobs, publisher, error_code="E303", since=parse_since("1h"))

``store`` is a :class:`pipeline.store.JobStore`; ``jobs`` a :class:`pipeline.store.TenantView`,
the jobs one caller may see, which every read of a job and every action on one takes, so that
none can forget the wall between tenants; ``fleet`` the broker's side
(:class:`Fleet`, implemented by ``workers.fleet.BrokerFleet``). Names are imported on first use
(:mod:`pipeline.support.lazy`): ``doclane stats`` loads the stats, not job submission and its
HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from errors import JobNotFound as JobNotFound
    from pipeline.resilience.storage import RedisUnavailable as RedisUnavailable
    from pipeline.store import AdminStore as AdminStore
    from pipeline.store import JobFilter as JobFilter

    from .fleet import BreakerState as BreakerState
    from .fleet import CountedFleet as CountedFleet
    from .fleet import Fleet as Fleet
    from .fleet import QueueDepth as QueueDepth
    from .fleet import read_breakers as read_breakers
    from .fleet import read_live_workers as read_live_workers
    from .heartbeats import WorkerInfo as WorkerInfo
    from .jobs import ErrorInfo as ErrorInfo
    from .jobs import JobDetail as JobDetail
    from .jobs import RetryOutcome as RetryOutcome
    from .jobs import WrongState as WrongState
    from .jobs import cancel_job as cancel_job
    from .jobs import error_info as error_info
    from .jobs import job_detail as job_detail
    from .jobs import list_jobs as list_jobs
    from .jobs import page_cursor as page_cursor
    from .jobs import parse_cursor as parse_cursor
    from .jobs import parse_since as parse_since
    from .jobs import retry_failed as retry_failed
    from .jobs import retry_job as retry_job
    from .settings import AdminSettings as AdminSettings
    from .stats import Failures as Failures
    from .stats import QueueBacklog as QueueBacklog
    from .stats import Stats as Stats
    from .stats import Throughput as Throughput
    from .stats import TierTimes as TierTimes
    from .stats import Window as Window
    from .stats import collect_stats as collect_stats
    from .stats import run_parts as run_parts
    from .stats import scoped_stats as scoped_stats

if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
