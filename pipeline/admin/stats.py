"""``doclane stats``: the fleet at a glance, from PostgreSQL, the broker and Redis at once.

The backlog is PostgreSQL's: queued jobs per queue and tenant (:meth:`JobReads.backlog
<pipeline.store.reads.JobReads.backlog>`, the read ``/metrics`` makes too). The broker holds a
few bells ("drain this queue"), shown beside it: bells with no backlog cost an empty claim, a
backlog with no bell waits for the reconciler's next pass.

The parts are asked side by side, each in its own thread, under one deadline: a broker or a
Redis that is down (or hangs) costs at most the deadline, and the answer names the part it could
not reach (``unreachable``) instead of failing whole. PostgreSQL answers the job questions from
indexes and rollups (``pipeline.store.admin``), cheap at a million jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from errors import PipelineError, entry
from pipeline.admin.fleet import (
    BreakerState,
    Fleet,
    QueueDepth,
    read_breakers,
    read_live_workers,
)
from pipeline.admin.heartbeats import WorkerInfo
from pipeline.admin.settings import AdminSettings
from pipeline.jobs.model import JobState
from pipeline.jobs.tenants import TenantFigures
from pipeline.queues import JOB_QUEUES, SIZE_TIERS
from pipeline.resilience.settings import ResilienceSettings
from pipeline.store.outbox import WebhookOutbox
from pipeline.store.scoped import TenantView
from pipeline.store.store import JobStore

T = TypeVar("T")
log = logging.getLogger("doclane.admin")


class Window(BaseModel):
    """Jobs that finished within a window, and the rate that makes."""

    minutes: int
    finished: int
    succeeded: int
    failed: int
    cancelled: int
    per_minute: float


class Throughput(BaseModel):
    last_1m: Window
    last_5m: Window
    last_60m: Window
    #: Jobs finished in each of the last 60 minutes, oldest first (the status page's chart).
    per_minute: list[int]


class TierTimes(BaseModel):
    """Seconds from a job's first claim to its success, over the percentile window."""

    tier: str
    jobs: int
    p50_s: float | None
    p95_s: float | None


class Batches(BaseModel):
    """Small documents converted together (one directory call each), over the last hour."""

    batches: int
    documents: int
    mean_size: float | None
    largest: int


class Failures(BaseModel):
    code: str
    title: str
    message: str
    action: str
    last_hour: int
    all_time: int


class QueueBacklog(BaseModel):
    """A job queue's queued jobs, counted by PostgreSQL (the queue itself)."""

    queue: str
    queued: int
    #: The same jobs by tenant (a tenant with none queued here is absent).
    tenants: dict[str, int] = {}


def queue_backlogs(backlog: dict[tuple[str, str], int]) -> list[QueueBacklog]:
    """Every job queue's backlog (0 where none waits), from the store's (queue, tenant) counts."""
    by_queue: dict[str, dict[str, int]] = {queue: {} for queue in JOB_QUEUES}
    for (queue, tenant), n in sorted(backlog.items()):
        if n:
            by_queue.setdefault(queue, {})[tenant] = n
    return [
        QueueBacklog(queue=queue, queued=sum(tenants.values()), tenants=tenants)
        for queue, tenants in by_queue.items()
    ]


class Stats(BaseModel):
    """What ``doclane stats --json`` prints and ``GET /v1/stats`` answers."""

    at: datetime
    #: Every state's count, an integer under the state's name (all time).
    jobs: dict[str, int] | None = None
    throughput: Throughput | None = None
    conversion_window_s: float
    conversion_time: list[TierTimes] = []
    batches_last_hour: Batches | None = None
    failures: list[Failures] = []
    breakers: list[BreakerState] | None = None
    #: Queued jobs per job queue and tenant, from PostgreSQL: the work waiting.
    queues: list[QueueBacklog] | None = None
    #: Bells waiting in the broker per queue (wake-ups, not work).
    bells: list[QueueDepth] | None = None
    workers: list[WorkerInfo] | None = None
    #: Completion webhooks not delivered yet: ``pending`` (not tried yet, or being sent),
    #: ``failed`` (tried and failed, still being retried), ``dead`` (gave up).
    webhooks: dict[str, int] | None = None
    #: Each tenant's jobs: queued and running now, succeeded, failed and cancelled over the last
    #: hour, finished per minute over the last five (a tenant's token: its own only).
    tenants: list[TenantFigures] | None = None
    #: Parts that could not be asked ("database", "broker", "redis", "workers"), and why.
    unreachable: dict[str, str] = {}


class _JobFigures(BaseModel):
    jobs: dict[str, int]
    queues: list[QueueBacklog]
    throughput: Throughput
    conversion_time: list[TierTimes]
    batches: Batches
    failures: list[Failures]
    webhooks: dict[str, int]
    tenants: list[TenantFigures]


def collect_stats(
    store: JobStore,
    fleet: Fleet | None,
    *,
    settings: AdminSettings,
    resilience: ResilienceSettings,
) -> Stats:
    """Ask every part at once; whatever has not answered by the deadline is unreachable.

    ``fleet`` None: no broker configured, queues unknown. No Redis configured: workers unknown
    (their heartbeats live there).
    """
    parts: dict[str, Callable[[], Any]] = {
        "database": lambda: _job_figures(store, settings.percentile_window_s),
        **fleet_parts(fleet, resilience),
    }
    answers, unreachable = run_parts(parts, deadline_s=settings.stats_deadline_s)
    figures: _JobFigures | None = answers.get("database")
    return Stats(
        at=datetime.now(UTC),
        jobs=figures.jobs if figures else None,
        throughput=figures.throughput if figures else None,
        conversion_window_s=settings.percentile_window_s,
        conversion_time=figures.conversion_time if figures else [],
        batches_last_hour=figures.batches if figures else None,
        failures=figures.failures if figures else [],
        breakers=answers.get("redis"),
        queues=figures.queues if figures else None,
        bells=answers.get("broker"),
        workers=answers.get("workers"),
        webhooks=figures.webhooks if figures else None,
        tenants=figures.tenants if figures else None,
        unreachable=unreachable,
    )


def scoped_stats(
    jobs: TenantView,
    fleet: Fleet | None,
    *,
    settings: AdminSettings,
    resilience: ResilienceSettings,
) -> Stats:
    """What ``GET /v1/stats`` answers the view's caller: the whole fleet's figures for every
    tenant's view; a tenant's own figures only, and nothing of the fleet's sums, the queues or
    the workers (they would tell it about the others' work)."""
    if jobs.scope.every:
        return collect_stats(jobs.store, fleet, settings=settings, resilience=resilience)
    answers, unreachable = run_parts(
        {"database": jobs.tenant_figures}, deadline_s=settings.stats_deadline_s
    )
    return Stats(
        at=datetime.now(UTC),
        conversion_window_s=settings.percentile_window_s,
        tenants=answers.get("database"),
        unreachable=unreachable,
    )


def fleet_parts(
    fleet: Fleet | None, resilience: ResilienceSettings
) -> dict[str, Callable[[], Any]]:
    """What stats and metrics ask outside PostgreSQL, by part name: breakers (``redis``),
    queue depths (``broker``), live workers (``workers``)."""
    parts: dict[str, Callable[[], Any]] = {"redis": lambda: read_breakers(resilience)}
    if fleet is not None:
        parts["broker"] = fleet.queue_depths
    if resilience.redis_url.strip():
        parts["workers"] = lambda: read_live_workers(resilience)
    return parts


def webhook_counts(store: JobStore) -> dict[str, int]:
    """The outbox's deliveries that have not arrived, by how they stand."""
    counts = WebhookOutbox(store.pool).counts()
    return {"pending": counts.pending, "failed": counts.failed, "dead": counts.dead}


def run_parts(
    parts: dict[str, Callable[[], Any]], *, deadline_s: float
) -> tuple[dict[str, Any], dict[str, str]]:
    """Run each part in its own thread; answers by name, and why the others failed.

    The threads are daemons and a late one is not waited for: a part stuck on a dead host is
    left to its own timeout while the caller answers, and never holds up the process's exit.
    """
    outcomes: dict[str, tuple[bool, Any]] = {}
    threads = []
    for name, fn in parts.items():

        def run(name: str = name, fn: Callable[[], Any] = fn) -> None:
            try:
                outcomes[name] = (True, fn())
            except Exception as exc:
                outcomes[name] = (False, exc)

        thread = threading.Thread(target=run, name=f"doclane-stats-{name}", daemon=True)
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + deadline_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    answers: dict[str, Any] = {}
    unreachable: dict[str, str] = {}
    for name in parts:
        if name not in outcomes:
            unreachable[name] = f"no answer within {deadline_s:g}s"
            continue
        ok, value = outcomes[name]
        if ok:
            answers[name] = value
        elif isinstance(value, PipelineError):
            unreachable[name] = f"{value.code}: {value.message}"
        else:
            unreachable[name] = f"{type(value).__name__}: {value}"
            log.info("stats: %s unreachable: %s", name, unreachable[name])
    return answers, unreachable


def _job_figures(store: JobStore, window_s: float) -> _JobFigures:
    counts = dict.fromkeys((s.value for s in JobState), 0)
    counts.update({s.value: n for s, n in store.reads.count_in_flight().items()})
    all_time: dict[str, int] = {}
    for total in store.admin.finished_totals():
        counts[total.state.value] += total.jobs
        if total.state is JobState.FAILED and total.error_code:
            all_time[total.error_code] = all_time.get(total.error_code, 0) + total.jobs
    last_hour = store.reads.failures_by_error_code(datetime.now(UTC) - timedelta(hours=1))
    failures = [
        Failures(
            code=code,
            title=_catalog(code)[0],
            message=_catalog(code)[1],
            action=_catalog(code)[2],
            last_hour=last_hour.get(code, 0),
            all_time=max(all_time.get(code, 0), last_hour.get(code, 0)),
        )
        for code in sorted(set(all_time) | set(last_hour))
    ]
    failures.sort(key=lambda f: (-f.last_hour, -f.all_time, f.code))
    return _JobFigures(
        jobs=counts,
        queues=queue_backlogs(store.reads.backlog()),
        throughput=_throughput(store),
        conversion_time=_percentiles(store, window_s),
        batches=batches_since(store, datetime.now(UTC) - timedelta(hours=1)),
        failures=failures,
        webhooks=webhook_counts(store),
        tenants=store.tenants.figures(),
    )


def batches_since(store: JobStore, since: datetime) -> Batches:
    count, documents, largest = store.admin.batch_sizes(since)
    return Batches(
        batches=count,
        documents=documents,
        mean_size=round(documents / count, 2) if count else None,
        largest=largest,
    )


def _throughput(store: JobStore) -> Throughput:
    per_minute = [0] * 60
    sums = {m: dict.fromkeys(("succeeded", "failed", "cancelled"), 0) for m in (1, 5, 60)}
    for row in store.admin.throughput():
        per_minute[59 - row.minutes_ago] += row.last_60m
        for minutes, count in ((1, row.last_1m), (5, row.last_5m), (60, row.last_60m)):
            sums[minutes][row.state.value] += count

    def window(minutes: int) -> Window:
        by_state = sums[minutes]
        finished = sum(by_state.values())
        return Window(minutes=minutes, finished=finished, per_minute=finished / minutes, **by_state)

    return Throughput(
        last_1m=window(1), last_5m=window(5), last_60m=window(60), per_minute=per_minute
    )


def _percentiles(store: JobStore, window_s: float) -> list[TierTimes]:
    found = {p.tier: p for p in store.admin.conversion_percentiles(window_s)}
    out = []
    for tier in SIZE_TIERS:
        p = found.get(tier)
        out.append(
            TierTimes(
                tier=tier,
                jobs=p.jobs if p else 0,
                p50_s=round(p.p50_s, 3) if p else None,
                p95_s=round(p.p95_s, 3) if p else None,
            )
        )
    return out


def _catalog(code: str) -> tuple[str, str, str]:
    try:
        row = entry(code)
    except KeyError:  # a code from a newer doclane, or typed by hand
        return ("unknown code", "This error code is not in this doclane's catalog.", "")
    return (row.title, row.user_message, row.action)


__all__ = [
    "Failures",
    "Stats",
    "Throughput",
    "TierTimes",
    "Window",
    "collect_stats",
    "fleet_parts",
    "run_parts",
    "scoped_stats",
    "webhook_counts",
]
