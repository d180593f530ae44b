"""The figures the alerts need, read from a real database by the /metrics collector: the
oldest queued job's age per queue, and each tenant's figures."""

from __future__ import annotations

import psycopg
from prometheus_client.core import Metric

from pipeline.api.metrics import FleetCollector
from pipeline.jobs.model import JobState
from pipeline.queues import JOB_QUEUES, QUEUE_LARGE, QUEUE_SMALL
from pipeline.settings.tree import read_settings
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.support.store_builders import job_in_state


def _scrape(store: JobStore) -> dict[str, Metric]:
    collector = FleetCollector(store, None, read_settings().resilience)
    return {family.name: family for family in collector.collect()}


def _value(family: Metric, **labels: str) -> float:
    (sample,) = [s for s in family.samples if s.labels == labels]
    return float(sample.value)


def test_the_oldest_queued_job_age_is_per_queue_and_zero_where_none_waits(
    store_settings: StoreSettings, migrated_database_url: str
) -> None:
    store = JobStore(store_settings)
    try:
        old = job_in_state(store, JobState.QUEUED, queue=QUEUE_LARGE)
        job_in_state(store, JobState.QUEUED, queue=QUEUE_LARGE)  # younger: not the oldest
        job_in_state(store, JobState.SUCCEEDED, queue=QUEUE_SMALL)  # finished: not waiting
        with psycopg.connect(migrated_database_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE jobs SET created_at = now() - interval '20 minutes' WHERE id = %s",
                (old.id,),
            )
        oldest = _scrape(store)["doclane_oldest_queued_job_age_seconds"]
        assert {s.labels["queue"] for s in oldest.samples} == set(JOB_QUEUES)
        assert 1200 <= _value(oldest, queue=QUEUE_LARGE) < 1300
        assert _value(oldest, queue=QUEUE_SMALL) == 0.0
    finally:
        store.close()


def test_each_tenant_has_its_jobs_finished_rate_and_limits_under_its_label(
    store_settings: StoreSettings,
) -> None:
    store = JobStore(store_settings)
    try:
        store.tenants.set("team-a", max_running=0, weight=3)
        store.tenants.set("team-b", max_queued=50)
        job_in_state(store, JobState.QUEUED, tenant="team-a")
        job_in_state(store, JobState.QUEUED, tenant="team-a")
        job_in_state(store, JobState.RUNNING, tenant="team-b")
        job_in_state(store, JobState.FAILED, tenant="team-b")
        scraped = _scrape(store)
        jobs = scraped["doclane_tenant_jobs"]
        assert _value(jobs, tenant="team-a", state="queued") == 2.0
        assert _value(jobs, tenant="team-b", state="running") == 1.0
        assert _value(jobs, tenant="default", state="queued") == 0.0
        finished = scraped["doclane_tenant_finished_last_hour"]
        assert _value(finished, tenant="team-b", outcome="failed") == 1.0
        assert _value(scraped["doclane_tenant_finished_per_minute"], tenant="team-b") == 0.2
        limits = scraped["doclane_tenant_limit"]
        assert _value(limits, tenant="team-a", limit="max_running") == 0.0
        assert _value(limits, tenant="team-a", limit="weight") == 3.0
        assert _value(limits, tenant="team-b", limit="max_queued") == 50.0
        assert not [
            s for s in limits.samples if s.labels == {"tenant": "team-b", "limit": "max_running"}
        ]
        # the fleet's families keep their labels
        assert {tuple(s.labels) for s in scraped["doclane_jobs"].samples} == {("state",)}
    finally:
        store.close()


def test_the_scrape_counts_no_lost_messages_now_that_none_can_be_owed(
    store_settings: StoreSettings, migrated_database_url: str
) -> None:
    """A bell stands for no job, so the lost-message sweep and its count are gone: a family
    that stays at zero forever would only tell an operator that nothing is wrong."""
    store = JobStore(store_settings)
    try:
        job_in_state(store, JobState.QUEUED, queue=QUEUE_SMALL)
        families = _scrape(store)
        assert "doclane_queue_backlog" in families
        assert not [name for name in families if "republished" in name]
    finally:
        store.close()
