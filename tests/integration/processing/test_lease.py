"""The lease keeper: renewals on the process's one timer thread, and a lost job noticed.

Real PostgreSQL; renewals are observed in the job's row and waited for with a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pipeline.jobs.model import Job
from pipeline.processing.lease import LeaseKeeper
from pipeline.store.store import JobStore
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.processing import Bench


def claimed(bench: Bench, n: int) -> Job:
    job_id = bench.submit_one(write_sample(bench.folder, "md", n))
    job = bench.store.attempts.claim(job_id, "worker-lease", lease_s=3)
    assert job is not None
    return job


def renewers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "attempt-timers"]


def test_leases_are_renewed_on_one_shared_thread(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench()
    store: JobStore = bench.store
    jobs = [claimed(bench, n) for n in range(1, 5)]
    first_expiry = {job.id: job.lease_expires_at for job in jobs}
    keepers = [
        LeaseKeeper(store.attempts, job.id, job.attempt, 3, interval_s=0.1).start() for job in jobs
    ]
    try:
        for job in jobs:
            wait_for(
                lambda job=job: (
                    (store.reads.get_job(job.id) or job).lease_expires_at > first_expiry[job.id]
                ),
                timeout=30,
                message=f"a renewal of {job.id}",
            )
        assert len(renewers()) == 1
        assert not any(keeper.lost for keeper in keepers)
    finally:
        for keeper in keepers:
            keeper.stop()


def test_a_cancelled_job_is_noticed_and_reported_once(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench()
    job = claimed(bench, 10)
    reports: list[str] = []
    keeper = LeaseKeeper(
        bench.store.attempts,
        job.id,
        job.attempt,
        3,
        interval_s=0.1,
        on_lost=lambda: reports.append("x"),
    ).start()
    try:
        assert bench.store.operations.cancel(job.id) is not None
        wait_for(lambda: keeper.lost, timeout=30, message="the keeper to notice the cancel")
        assert reports == ["x"]
    finally:
        keeper.stop()


def test_a_stopped_keeper_renews_no_more_and_reports_nothing(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench()
    job = claimed(bench, 20)
    reports: list[str] = []
    keeper = LeaseKeeper(
        bench.store.attempts,
        job.id,
        job.attempt,
        3,
        interval_s=0.1,
        on_lost=lambda: reports.append("x"),
    ).start()
    keeper.stop()
    assert bench.store.attempts.finish(job.id, job.attempt, {"md": "# done"})
    # Another keeper on the same thread proves the renewer went past the stopped one's due time.
    other = claimed(bench, 21)
    witness = LeaseKeeper(bench.store.attempts, other.id, other.attempt, 3, interval_s=0.3).start()
    try:
        before = other.lease_expires_at
        wait_for(
            lambda: (bench.store.reads.get_job(other.id) or other).lease_expires_at > before,
            timeout=30,
            message="the witness's renewal",
        )
    finally:
        witness.stop()
    assert not keeper.lost and reports == []
