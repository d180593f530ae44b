"""``/metrics``: the whole fleet's figures, read at scrape time, for Prometheus.

Workers are separate Celery prefork processes: counters kept in the API process would see only
the API's own work, and counters kept in each worker would need a push gateway or a port per
process. The fleet's history is in PostgreSQL already (every job, every state change, every MCP
call with tool, duration and outcome), so a custom collector reads it at scrape time, from the
rollups of migration 0007 plus the rows since their mark: a few index scans, cheap at a million
jobs. Breakers and the workers' heartbeats come from Redis and queue depths from the broker,
like ``doclane stats``; a part that cannot be read is left out of the scrape and
``doclane_up{part}`` says so.

Per tenant (``tenant`` label: tenants are made by operators, so the label's values are bounded):
jobs queued and running now, jobs finished over the last hour by outcome, the finishing rate
and each tenant's limits. These are families of their own beside the fleet's (whose series keep
their labels, so dashboards and alerts on them are unchanged), and gauges: the all-time sums
come from rollups kept without a tenant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from pipeline.admin.fleet import Fleet
from pipeline.admin.stats import batches_since, fleet_parts, run_parts, webhook_counts
from pipeline.jobs.model import JobState
from pipeline.jobs.tenants import TenantFigures
from pipeline.queues import JOB_QUEUES
from pipeline.resilience.settings import ResilienceSettings
from pipeline.store.admin import EventTotal, Percentiles
from pipeline.store.store import JobStore

_BREAKER_STATES = ("closed", "half-open", "open")
#: The window of the conversion-time percentiles: long enough to hold jobs of every tier at a
#: modest rate, short enough that a dashboard sees a slowdown within minutes.
CONVERSION_WINDOW_S = 15 * 60


class FleetCollector(Collector):
    """Collects on every scrape; registered in a registry of its own (not the global one)."""

    def __init__(
        self,
        store: JobStore,
        fleet: Fleet | None,
        resilience: ResilienceSettings,
        *,
        deadline_s: float = 3.0,
    ) -> None:
        self.store = store
        self.fleet = fleet
        self.resilience = resilience
        self.deadline_s = deadline_s

    def collect(self) -> Iterator[Metric]:
        parts: dict[str, Callable[[], Any]] = {
            "database": self._database,
            **fleet_parts(self.fleet, self.resilience),
        }
        answers, unreachable = run_parts(parts, deadline_s=self.deadline_s)
        up = GaugeMetricFamily(
            "doclane_up", "Whether a part of the fleet answered this scrape.", labels=["part"]
        )
        for part in parts:
            up.add_metric([part], 0.0 if part in unreachable else 1.0)
        yield up
        if "database" in answers:
            yield from answers["database"]
        if "redis" in answers:
            yield from _breakers(answers["redis"])
        if "broker" in answers:
            depth = GaugeMetricFamily(
                "doclane_queue_depth",
                "Bells waiting in a queue (wake-ups: the backlog is doclane_jobs's queued).",
                labels=["queue"],
            )
            for q in answers["broker"]:
                depth.add_metric([q.queue], float(q.waiting))
            yield depth
        if "workers" in answers:
            yield GaugeMetricFamily(
                "doclane_workers",
                "Worker nodes whose heartbeat is alive.",
                len(answers["workers"]),
            )

    def _database(self) -> list[Metric]:
        counts = dict.fromkeys((s.value for s in JobState), 0)
        counts.update({s.value: n for s, n in self.store.reads.count_in_flight().items()})
        conversions = CounterMetricFamily(
            "doclane_conversions", "Jobs that finished, by outcome.", labels=["outcome"]
        )
        failures = CounterMetricFamily(
            "doclane_job_failures", "Jobs that failed, by error code.", labels=["error_code"]
        )
        by_outcome: dict[str, int] = defaultdict(int)
        for total in self.store.admin.finished_totals():
            counts[total.state.value] += total.jobs
            by_outcome[total.state.value] += total.jobs
            if total.state is JobState.FAILED and total.error_code:
                failures.add_metric([total.error_code], float(total.jobs))
        for outcome in sorted(s.value for s in JobState if s.terminal):
            conversions.add_metric([outcome], float(by_outcome[outcome]))
        jobs = GaugeMetricFamily("doclane_jobs", "Jobs by state.", labels=["state"])
        for state, n in counts.items():
            jobs.add_metric([state], float(n))
        events = self.store.admin.event_totals()
        bounds = self.store.admin.mcp_duration_bounds()
        batches = batches_since(self.store, datetime.now(UTC) - timedelta(hours=1))
        batch = GaugeMetricFamily(
            "doclane_batches_last_hour",
            "Batches of small documents (one directory call each) in the last hour.",
        )
        batch.add_metric([], float(batches.batches))
        batched = GaugeMetricFamily(
            "doclane_batched_documents_last_hour",
            "Documents converted in batches in the last hour (divide by doclane_batches_last_hour "
            "for the mean batch size).",
        )
        batched.add_metric([], float(batches.documents))
        return [
            jobs,
            _oldest_queued(self.store.admin.oldest_queued()),
            _backlog(self.store.reads.backlog()),
            _conversion_times(self.store.admin.conversion_percentiles(CONVERSION_WINDOW_S)),
            conversions,
            failures,
            batch,
            batched,
            _webhooks(webhook_counts(self.store)),
            *_event_metrics(events, bounds),
            *_tenants(self.store.tenants.figures()),
        ]


def _backlog(queued: dict[tuple[str, str], int]) -> Metric:
    """Queued jobs per queue and tenant, read from PostgreSQL (the queue): what the workers
    scale on. Every job queue has a series (0 when none waits), so a sum never vanishes."""
    backlog = GaugeMetricFamily(
        "doclane_queue_backlog",
        "Queued jobs of a queue and tenant (PostgreSQL's count: the workers scale on it).",
        labels=["queue", "tenant"],
    )
    seen = {queue for queue, _ in queued}
    for (queue, tenant), n in sorted(queued.items()):
        backlog.add_metric([queue, tenant], float(n))
    for queue in JOB_QUEUES:
        if queue not in seen:
            backlog.add_metric([queue, "default"], 0.0)
    return backlog


def _oldest_queued(ages: dict[str, float]) -> Metric:
    """Every job queue, 0 when none waits: the alert on a queue that does not drain compares
    the figure with itself over time, which wants a series that never vanishes."""
    oldest = GaugeMetricFamily(
        "doclane_oldest_queued_job_age_seconds",
        "Seconds since the oldest queued job of a queue was submitted (0: none waits).",
        labels=["queue"],
    )
    for queue in JOB_QUEUES:
        oldest.add_metric([queue], ages.get(queue, 0.0))
    return oldest


def _conversion_times(percentiles: list[Percentiles]) -> Metric:
    times = GaugeMetricFamily(
        "doclane_conversion_duration_seconds",
        "Seconds from first claim to success of the jobs that succeeded in the last 15 minutes, "
        "by size tier (percentile 50 and 95).",
        labels=["tier", "percentile"],
    )
    for p in percentiles:
        times.add_metric([p.tier, "50"], p.p50_s)
        times.add_metric([p.tier, "95"], p.p95_s)
    return times


def _webhooks(counts: dict[str, int]) -> Metric:
    deliveries = GaugeMetricFamily(
        "doclane_webhook_deliveries",
        "Completion webhooks not delivered yet: pending, failed (still being retried), dead.",
        labels=["state"],
    )
    for state, n in counts.items():
        deliveries.add_metric([state], float(n))
    return deliveries


def _event_metrics(events: list[EventTotal], bounds: list[float]) -> list[Metric]:
    calls = CounterMetricFamily(
        "doclane_mcp_calls", "MCP tool calls, by tool and outcome.", labels=["tool", "outcome"]
    )
    retries = CounterMetricFamily(
        "doclane_retries", "Times a job was scheduled for another attempt (entered retrying)."
    )
    per_call: dict[tuple[str, str], int] = defaultdict(int)
    # tool -> bucket -> calls, and tool -> duration sum (ms)
    buckets: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    sums: dict[str, float] = defaultdict(float)
    entered_retrying = 0
    for e in events:
        if e.kind == "mcp_call":
            per_call[(e.name, e.outcome)] += e.events
            buckets[e.name][e.bucket] += e.events
            sums[e.name] += e.duration_ms_sum
        elif e.name == JobState.RETRYING.value:
            entered_retrying += e.events
    for (tool, outcome), n in sorted(per_call.items()):
        calls.add_metric([tool, outcome], float(n))
    retries.add_metric([], float(entered_retrying))
    latency = HistogramMetricFamily(
        "doclane_mcp_call_duration_seconds", "MCP tool call latency, by tool.", labels=["tool"]
    )
    for tool, counts in sorted(buckets.items()):
        # width_bucket: bucket i holds [bounds[i-1], bounds[i]) (1-based), so "le bounds[k]"
        # (k 0-based, k >= 1) is every bucket up to k.
        cumulative: list[tuple[str, float]] = []
        running = 0
        for k in range(1, len(bounds)):
            running += counts.get(k, 0)
            cumulative.append((_le(bounds[k] / 1000.0), float(running)))
        cumulative.append(("+Inf", float(sum(counts.values()))))
        latency.add_metric([tool], cumulative, sum_value=sums[tool] / 1000.0)
    return [calls, retries, latency]


def _tenants(figures: list[TenantFigures]) -> list[Metric]:
    jobs = GaugeMetricFamily(
        "doclane_tenant_jobs", "A tenant's jobs queued and running now.", labels=["tenant", "state"]
    )
    finished = GaugeMetricFamily(
        "doclane_tenant_finished_last_hour",
        "A tenant's jobs that finished in the last hour, by outcome.",
        labels=["tenant", "outcome"],
    )
    rate = GaugeMetricFamily(
        "doclane_tenant_finished_per_minute",
        "A tenant's jobs finished per minute over the last five minutes.",
        labels=["tenant"],
    )
    limits = GaugeMetricFamily(
        "doclane_tenant_limit",
        "A tenant's weight, max_running and max_queued (a limit not set is absent; "
        "max_running 0: paused).",
        labels=["tenant", "limit"],
    )
    for f in figures:
        name = f.tenant.name
        jobs.add_metric([name, "queued"], float(f.queued))
        jobs.add_metric([name, "running"], float(f.running))
        for outcome, n in (
            ("succeeded", f.succeeded),
            ("failed", f.failed),
            ("cancelled", f.cancelled),
        ):
            finished.add_metric([name, outcome], float(n))
        rate.add_metric([name], f.per_minute)
        limits.add_metric([name, "weight"], float(f.tenant.weight))
        for limit, value in (
            ("max_running", f.tenant.max_running),
            ("max_queued", f.tenant.max_queued),
        ):
            if value is not None:
                limits.add_metric([name, limit], float(value))
    return [jobs, finished, rate, limits]


def _breakers(states: list[Any]) -> list[Metric]:
    state = GaugeMetricFamily(
        "doclane_breaker_state",
        "1 for the state an origin's circuit breaker is in.",
        labels=["origin", "state"],
    )
    failures = GaugeMetricFamily(
        "doclane_breaker_failures", "Consecutive failures counted by a breaker.", labels=["origin"]
    )
    for b in states:
        for name in _BREAKER_STATES:
            state.add_metric([b.origin, name], 1.0 if b.state == name else 0.0)
        failures.add_metric([b.origin], float(b.failures))
    return [state, failures]


def _le(seconds: float) -> str:
    return f"{seconds:g}"


def metrics_registry(collector: FleetCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
