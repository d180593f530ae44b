"""The one claim on a real database: who goes next, caps, pause, due retries."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from uuid import UUID

import psycopg
import pytest

from pipeline.jobs.model import Job, JobState
from pipeline.queues import SMALL_BELOW_BYTES, RecordingPublisher, wake
from pipeline.store.attempts import ClaimFound
from pipeline.store.store import JobStore
from tests.support.store_builders import tenant

QUEUE = "doclane.small"


def own(raw: psycopg.Connection, job: Job, name: str) -> Job:
    """The job made ``name``'s (lane `tenancy` submits with a tenant; here the row is moved,
    which the lane triggers follow)."""
    raw.execute("UPDATE jobs SET tenant = %s WHERE id = %s", (name, job.id))
    return job


def backlog(raw: psycopg.Connection, name: str, count: int, *, priority: int = 0) -> None:
    """``count`` queued jobs of ``name``, older than anything made after."""
    raw.execute(
        "INSERT INTO jobs (id, source_kind, source_uri, size_bytes, profile, options, formats,"
        " queue, priority, tenant, created_at)"
        " SELECT gen_random_uuid(), 'file', '/inbox/b' || n || '.docx', 1000, 'auto', '{}',"
        " '{md}', %s, %s, %s, now() - interval '1 hour' + n * interval '1 ms'"
        " FROM generate_series(1, %s) n",
        (QUEUE, priority, name, count),
    )


@pytest.fixture
def raw(raw_sql: psycopg.Connection) -> Iterator[psycopg.Connection]:
    yield raw_sql


def next_tenants(store: JobStore, n: int) -> list[str]:
    taken = []
    for _ in range(n):
        claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
        assert claim.lead is not None
        taken.append(claim.lead.tenant)
    return taken


def test_round_robin_weighted_fifo_within_a_tenant_priorities_first(
    store: JobStore, raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    tenant(raw, "a", weight=2)
    tenant(raw, "b")
    tenant(raw, "c")
    made: dict[str, list[UUID]] = {"a": [], "b": [], "c": []}
    for _ in range(12):
        for name, ids in made.items():
            ids.append(own(raw, job_factory(), name).id)
    urgent = own(raw, job_factory(priority=5), "c")

    first = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert first.lead is not None and first.lead.id == urgent.id, "a higher priority first"
    claimed: list[Job] = []
    for _ in range(20):
        claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
        assert claim.lead is not None
        claimed.append(claim.lead)
    counts = Counter(job.tenant for job in claimed)
    assert counts == {"a": 10, "b": 5, "c": 5}, counts  # weights 2:1:1
    for name in made:  # FIFO within a tenant
        ids = [job.id for job in claimed if job.tenant == name]
        assert ids == made[name][: len(ids)]
    # round-robin, not bursts: every window of four claims serves every tenant
    for start in range(0, 20, 4):
        assert set(job.tenant for job in claimed[start : start + 4]) == {"a", "b", "c"}


def test_a_new_tenants_job_is_claimed_within_one_job_per_active_tenant(
    store: JobStore, raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    backlog(raw, tenant(raw, "big"), 10_000)
    backlog(raw, tenant(raw, "mid"), 100)
    next_tenants(store, 5)
    newcomer = own(raw, job_factory(), tenant(raw, "small"))
    waited = 0
    while True:
        claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
        assert claim.lead is not None
        if claim.lead.id == newcomer.id:
            break
        waited += 1
    assert waited <= 2, f"the newcomer waited for {waited} jobs behind two active tenants"


def test_pause_claims_nothing_and_resume_rings_where_work_waits(
    store: JobStore, raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    """A paused tenant's work is found, not taken ('capped'), and is not claimable: nothing is
    owed and nobody rings for it. Resumed, its queue has claimable work, and a wake-up rings
    there (once: a bell already waiting is enough)."""
    tenant(raw, "p", cap=0)
    jobs = [own(raw, job_factory(), "p") for _ in range(3)]
    claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert (claim.lead, claim.found) == (None, ClaimFound.CAPPED)
    assert all(store.reads.get_job(j.id).state is JobState.QUEUED for j in jobs)  # type: ignore[union-attr]
    assert store.operations.claimable_queues() == {}
    publisher = RecordingPublisher(depths={QUEUE: 0})
    assert wake(publisher, store.operations.claimable_queues()) == ({}, {})

    tenant(raw, "p", cap=2)  # resumed
    assert store.operations.claimable_queues() == {QUEUE: 2}, "as many as its room"
    assert wake(publisher, store.operations.claimable_queues()) == ({QUEUE: 2}, {})
    assert [m.queue for m in publisher.messages] == [QUEUE, QUEUE]
    publisher.depths[QUEUE] = 2
    assert wake(publisher, store.operations.claimable_queues()) == ({}, {}), "bells wait"
    taken = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert taken.lead is not None and taken.lead.id == jobs[0].id


def test_a_capped_tenant_runs_at_most_its_cap_and_others_go_on(
    store: JobStore, raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    tenant(raw, "capped", cap=2)
    tenant(raw, "free")
    capped = [own(raw, job_factory(), "capped") for _ in range(5)]
    for _ in range(5):
        own(raw, job_factory(), "free")
    taken = next_tenants(store, 7)
    assert Counter(taken) == {"capped": 2, "free": 5}
    claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert (claim.lead, claim.found) == (None, ClaimFound.CAPPED)
    # one ends: room for one more
    running = [j for j in capped if store.reads.get_job(j.id).state is JobState.RUNNING]  # type: ignore[union-attr]
    job = store.reads.get_job(running[0].id)
    assert job is not None and store.attempts.finish(job.id, job.attempt, {"md": "# x"})
    again = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert again.lead is not None and again.lead.tenant == "capped"


def test_concurrent_claimers_never_exceed_a_cap(
    make_store: Callable[[], JobStore], raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    """Eight claimers (each its own pool, like separate processes) race on one tenant's cap:
    the count inside each claim's lock is exact."""
    tenant(raw, "t", cap=3)
    for _ in range(30):
        own(raw, job_factory(), "t")
    workers = [make_store() for _ in range(8)]
    barrier = threading.Barrier(len(workers))
    got: list[Job] = []
    lock = threading.Lock()

    def claim(worker: JobStore) -> None:
        barrier.wait()
        for _ in range(3):
            taken = worker.attempts.claim_queue(QUEUE, "w", lease_s=60)
            if taken.lead is not None:
                with lock:
                    got.append(taken.lead)

    threads = [threading.Thread(target=claim, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 3
    (running,) = raw.execute(
        "SELECT count(*) FROM jobs WHERE tenant = 't' AND state = 'running'"
    ).fetchone()  # type: ignore[misc]
    assert running == 3


def test_a_due_retrying_job_rejoins_its_lane_at_its_age(
    store: JobStore, raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    """A retry's time is a column the claim honours: not due, the claim finds the queue empty;
    due, the claim stages it back into its lane, where it is its tenant's oldest."""
    retrying = job_factory(JobState.RETRYING)
    early = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert (early.lead, early.found) == (None, ClaimFound.EMPTY)
    later = job_factory()
    raw.execute("UPDATE jobs SET next_attempt_at = now() - interval '1 s' WHERE id = %s",
                (retrying.id,))  # fmt: skip
    assert store.operations.claimable_queues() == {QUEUE: 2}
    claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert claim.lead is not None and claim.lead.id == retrying.id, "its tenant's oldest"
    assert claim.lead.attempt == 2
    after = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert after.lead is not None and after.lead.id == later.id


def test_a_round_takes_companions_by_rotation_within_each_tenants_room(
    store: JobStore, raw: psycopg.Connection, job_factory: Callable[..., Job]
) -> None:
    tenant(raw, "a", cap=3)
    tenant(raw, "b")
    for _ in range(8):
        own(raw, job_factory(), "a")
    b = [own(raw, job_factory(), "b") for _ in range(8)]
    claim = store.attempts.claim_queue(
        QUEUE, "w", lease_s=60, limit=8, small_below=SMALL_BELOW_BYTES
    )
    assert claim.lead is not None
    taken = Counter(job.tenant for job in [claim.lead, *claim.companions])
    assert taken == {"a": 3, "b": 5}, taken
    assert {j.id for j in [claim.lead, *claim.companions] if j.tenant == "b"} == {
        j.id for j in b[:5]
    }


def test_a_resumed_tenant_rejoins_the_rotation_without_a_burst(
    store: JobStore, raw: psycopg.Connection
) -> None:
    """A paused tenant's lane keeps its pass while the others' advance: resumed, it must take
    its turn among them at once, not every claim until it has caught up."""
    tenant(raw, "p", cap=0)
    for name in ("p", tenant(raw, "a"), tenant(raw, "b")):
        backlog(raw, name, 60)
    assert set(next_tenants(store, 40)) == {"a", "b"}, "nothing of a paused tenant"

    # a new lane starts at the smallest pass of the lanes with work: the paused one's, far back
    backlog(raw, tenant(raw, "n"), 20)
    tenant(raw, "p", cap=None)  # resumed, as `doclane tenants set p --max-running none` does
    taken = next_tenants(store, 16)
    for start in range(0, 16, 4):
        assert sorted(taken[start : start + 4]) == ["a", "b", "n", "p"], taken
    raised = tenant(raw, "q", cap=0)  # the same through a cap raised from 0, with a weight
    backlog(raw, raised, 20)
    next_tenants(store, 12)
    tenant(raw, "q", weight=2, cap=5)
    taken = next_tenants(store, 6)  # weights 1:1:1:1:2
    assert set(taken) == {"a", "b", "n", "p", "q"} and taken.count("q") in (2, 3), taken
