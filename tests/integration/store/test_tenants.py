"""Tenants in the store: made and changed field by field, their figures, and the queue quota a
submission meets, exact under concurrent submitters."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from errors import TenantQueueFull, UnknownTenant
from pipeline.jobs.model import JobState
from pipeline.store.store import JobStore
from pipeline.store.tenants import UNSET
from tests.fixtures.waiting import wait_for
from tests.support.jobs import succeeded_job
from tests.support.store_builders import (
    job_in_state,
    new_job,
    sha256_of,
    someone_waits_for_a_lock,
)


def test_default_exists_and_set_changes_only_the_fields_given(store: JobStore) -> None:
    default = store.tenants.get("default")
    assert default is not None and default.weight == 1 and default.max_running is None
    made = store.tenants.set("team-a", max_running=4, max_queued=100)
    assert (made.weight, made.max_running, made.max_queued) == (1, 4, 100)
    changed = store.tenants.set("team-a", weight=3)
    assert (changed.weight, changed.max_running, changed.max_queued) == (3, 4, 100)
    cleared = store.tenants.set("team-a", max_running=None)
    assert (cleared.weight, cleared.max_running, cleared.max_queued) == (3, None, 100)
    paused = store.tenants.set("team-a", max_running=0)
    assert paused.paused and paused.updated_at is not None and made.updated_at is not None
    assert paused.updated_at >= made.updated_at
    assert store.tenants.set("team-a", weight=UNSET).weight == 3


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("Team", {}),
        ("-x", {}),
        ("ok", {"weight": 0}),
        ("ok", {"weight": 1001}),
        ("ok", {"max_running": -1}),
        ("ok", {"max_queued": -2}),
    ],
)
def test_bad_names_and_values_are_refused_before_the_database(
    store: JobStore, name: str, fields: dict[str, int]
) -> None:
    with pytest.raises(ValueError):
        store.tenants.set(name, **fields)
    assert store.tenants.get(name) is None


def test_ensure_makes_the_missing_and_leaves_the_rest(store: JobStore) -> None:
    store.tenants.set("team-a", max_queued=5)
    store.tenants.ensure(["team-a", "team-b", "team-b"])
    a, b = store.tenants.get("team-a"), store.tenants.get("team-b")
    assert a is not None and a.max_queued == 5
    assert b is not None and b.max_queued is None


def test_figures_count_each_tenants_jobs(store: JobStore) -> None:
    store.tenants.set("team-a")
    store.tenants.set("team-b", weight=2)
    for _ in range(3):
        job_in_state(store, JobState.QUEUED, tenant="team-a")
    job_in_state(store, JobState.RUNNING, tenant="team-a")
    job_in_state(store, JobState.SUCCEEDED, tenant="team-b")
    job_in_state(store, JobState.FAILED, tenant="team-b")
    job_in_state(store, JobState.QUEUED, tenant="team-b", queue="doclane.large", priority=5)
    figures = {f.tenant.name: f for f in store.tenants.figures()}
    assert list(figures) == ["default", "team-a", "team-b"]
    a, b = figures["team-a"], figures["team-b"]
    assert (a.queued, a.running, a.succeeded, a.failed) == (3, 1, 0, 0)
    assert (b.queued, b.running, b.succeeded, b.failed) == (1, 0, 1, 1)
    assert b.per_minute == pytest.approx(2 / 5) and b.tenant.weight == 2
    [only] = store.tenants.figures("team-b")
    assert only == b
    assert store.tenants.finished_since("team-b", 300) == 2


def test_a_job_is_its_tenants_and_an_unknown_tenant_is_refused(store: JobStore) -> None:
    store.tenants.set("team-a")
    made = store.submissions.create(new_job(tenant="team-a"))
    job = store.reads.get_job(made.job_id)
    assert job is not None and job.tenant == "team-a"
    with pytest.raises(UnknownTenant):
        store.submissions.create(new_job(tenant="nobody"))


def test_a_submission_past_the_quota_is_cut_at_it(store: JobStore) -> None:
    store.tenants.set("team-a", max_queued=5)
    job_in_state(store, JobState.QUEUED, tenant="team-a")
    job_in_state(store, JobState.RUNNING, tenant="team-a")  # running: not queued
    made = store.submissions.admit([new_job(tenant="team-a") for _ in range(6)])
    assert [m is not None for m in made] == [True] * 4 + [False] * 2
    assert store.tenants.figures("team-a")[0].queued == 5
    with pytest.raises(TenantQueueFull):  # all or none
        store.submissions.create_many([new_job(tenant="team-a")])
    # another tenant's queue is its own
    assert all(store.submissions.admit([new_job() for _ in range(3)]))


def test_dedup_answers_cost_nothing_and_never_cross_tenants(store: JobStore) -> None:
    store.tenants.set("team-a", max_queued=1)
    store.tenants.set("team-b")
    report = sha256_of("the report")
    done = succeeded_job(store, content_sha256=report, tenant="team-a")
    hits = store.submissions.admit(
        [new_job(content_sha256=report, tenant="team-a") for _ in range(3)]
        + [new_job(tenant="team-a"), new_job(tenant="team-a")]
    )
    assert [h.job_id if h and h.deduplicated else None for h in hits[:3]] == [done.id] * 3
    assert hits[3] is not None and not hits[3].deduplicated and hits[4] is None
    other = store.submissions.create(new_job(content_sha256=report, tenant="team-b"))
    assert not other.deduplicated  # team-b may not be answered with team-a's job


def test_a_split_document_costs_one(store: JobStore) -> None:
    store.tenants.set("team-a", max_queued=2)
    made = store.submissions.admit(
        [new_job(tenant="team-a", slices=("1-2", "3-4", "5")), new_job(tenant="team-a")]
    )
    assert all(made) and len(made[0].slice_ids) == 3  # type: ignore[union-attr]
    slices = store.reads.get_jobs(made[0].slice_ids)  # type: ignore[union-attr]
    assert {s.tenant for s in slices} == {"team-a"}


def test_a_second_submitter_counts_after_the_first_commits(
    store: JobStore, migrated_database_url: str
) -> None:
    """A submitter holding the tenant's lock with 60 uncommitted jobs: the second waits for it,
    then counts them (without the lock it would count none and queue 80: 140 of 100)."""
    store.tenants.set("team-a", max_queued=100)
    with psycopg.connect(migrated_database_url) as first:
        first.execute("SELECT 1 FROM tenants WHERE name = 'team-a' FOR NO KEY UPDATE")
        first.execute(
            "INSERT INTO jobs (id, source_kind, source_uri, profile, queue, formats, tenant)"
            " SELECT gen_random_uuid(), 'file', '/inbox/' || i, 'auto', 'doclane.small',"
            " '{md}', 'team-a' FROM generate_series(1, 60) i"
        )
        done = threading.Event()
        made: list[object] = []

        def second() -> None:
            made.extend(store.submissions.admit([new_job(tenant="team-a") for _ in range(80)]))
            done.set()

        racing = threading.Thread(target=second)
        racing.start()
        wait_for(lambda: someone_waits_for_a_lock(migrated_database_url), timeout=10)
        assert not done.is_set()
        first.commit()
    racing.join(timeout=10)
    assert done.is_set()
    assert sum(m is not None for m in made) == 40
    assert store.tenants.figures("team-a")[0].queued == 100


def test_many_concurrent_submitters_never_pass_the_quota(store: JobStore) -> None:
    store.tenants.set("team-a", max_queued=100)
    start = threading.Barrier(6)

    def submit(_: int) -> int:
        start.wait()
        made = store.submissions.admit([new_job(tenant="team-a") for _ in range(30)])
        return sum(m is not None for m in made)

    with ThreadPoolExecutor(6) as pool:
        accepted = sum(pool.map(submit, range(6)))
    assert accepted == 100
    assert store.tenants.figures("team-a")[0].queued == 100
