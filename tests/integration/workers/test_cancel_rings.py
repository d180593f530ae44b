"""A cancel that stops a running job frees its tenant's running slot at once, so it rings the
job's queue: a capped tenant's next job is taken now, not at the next lease renewal or pass."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.admin.jobs import cancel_job
from pipeline.jobs.model import JobState
from pipeline.jobs.tenants import EVERY_TENANT
from pipeline.queues import QUEUE_SMALL
from pipeline.settings.tree import read_settings
from pipeline.store.scoped import TenantView
from pipeline.store.store import JobStore
from tests.fixtures.brokers import Broker
from tests.support.store_builders import job_in_state
from workers.app import create_app
from workers.publisher import CeleryPublisher


@pytest.fixture
def publisher(redis_broker: Broker) -> Iterator[CeleryPublisher]:
    app = create_app(read_settings(worker=dict(broker_url=redis_broker.url)))
    yield CeleryPublisher(app)
    app.close()


def test_cancelling_a_capped_tenants_running_job_rings_its_queue_once(
    store: JobStore, publisher: CeleryPublisher
) -> None:
    store.tenants.set("capped", max_running=1)
    running = job_in_state(store, JobState.RUNNING, tenant="capped", queue=QUEUE_SMALL)
    waiting = job_in_state(store, JobState.QUEUED, tenant="capped", queue=QUEUE_SMALL)
    assert publisher.waiting(QUEUE_SMALL) == 0

    cancel_job(TenantView(store, EVERY_TENANT), waiting.id, publisher)
    assert publisher.waiting(QUEUE_SMALL) == 0, "a queued job's cancel frees no running slot"
    job_in_state(store, JobState.QUEUED, tenant="capped", queue=QUEUE_SMALL)
    cancel_job(TenantView(store, EVERY_TENANT), running.id, publisher)

    assert publisher.waiting(QUEUE_SMALL) == 1
    assert store.operations.claimable_queues().get(QUEUE_SMALL, 0) >= 1, "room, and a bell"


def test_doclane_cancel_of_a_running_job_rings_its_queue(
    store: JobStore,
    publisher: CeleryPublisher,
    redis_broker: Broker,
    migrated_database_url: str,
    tmp_path: Path,
) -> None:
    store.tenants.set("capped", max_running=1)
    running = job_in_state(store, JobState.RUNNING, tenant="capped", queue=QUEUE_SMALL)
    job_in_state(store, JobState.QUEUED, tenant="capped", queue=QUEUE_SMALL)
    env = {"DOCLANE_DATABASE_URL": migrated_database_url, "DOCLANE_BROKER_URL": redis_broker.url}
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "cancel", str(running.id)],
        env={**os.environ, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert publisher.waiting(QUEUE_SMALL) == 1
