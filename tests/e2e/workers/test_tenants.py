"""Tenants through real worker processes: a running cap held across processes, through a kill
-9 and the reconciler's requeue; a pause that claims nothing and loses nothing; a capped
tenant's jobs taken by the drain that ends one, and a resumed tenant's rung for.

How many of a tenant's jobs run at once is measured in PostgreSQL, exactly: a trigger the test
installs records, after every job that starts running, the tenant's count of running jobs.
The trigger locks the tenant's row before it counts (as the claim does), so claimers that
would both start a job of the tenant are ordered there and the second one's count, taken after
the first committed, includes the first's job: two claims that each thought there was room for
one would show as one over the cap, whichever path claimed them (lone, round, batch).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from uuid import UUID

import psycopg
import pytest

from pipeline.jobs.model import EventKind, Job, JobState
from pipeline.queues import QUEUE_SMALL
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.processes import parent_of
from tests.fixtures.samples import write_mixed
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.brokers import small_queue_messages
from tests.support.worker_results import CONVERT, assert_one_result_set

PEAK_WATCH = """
CREATE TABLE running_peaks (tenant text PRIMARY KEY, peak integer NOT NULL);
CREATE FUNCTION record_running_peak() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    running integer;
BEGIN
    PERFORM 1 FROM tenants WHERE name = NEW.tenant FOR NO KEY UPDATE;
    SELECT count(*) INTO running FROM jobs WHERE tenant = NEW.tenant AND state = 'running';
    INSERT INTO running_peaks AS p VALUES (NEW.tenant, running)
    ON CONFLICT (tenant) DO UPDATE SET peak = greatest(p.peak, excluded.peak);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_record_running_peak AFTER UPDATE ON jobs FOR EACH ROW
    WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running')
    EXECUTE FUNCTION record_running_peak();
"""


@pytest.fixture
def peaks(raw_sql: psycopg.Connection) -> Callable[[], dict[str, int]]:
    """Installs the trigger; returns the peak of running jobs seen per tenant."""
    raw_sql.execute(PEAK_WATCH)

    def read() -> dict[str, int]:
        return dict(raw_sql.execute("SELECT tenant, peak FROM running_peaks").fetchall())  # type: ignore[arg-type]

    return read


def tenant(raw: psycopg.Connection, name: str, cap: int | None) -> None:
    raw.execute(
        "INSERT INTO tenants (name, max_running) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running",
        (name, cap),
    )


def submitted_as(
    cluster: Cluster, raw: psycopg.Connection, name: str, paths: Sequence[Path]
) -> list[UUID]:
    """Jobs submitted as ``name`` (made by :func:`tenant` first)."""
    del raw
    ids = cluster.submit([str(p) for p in paths], tenant=name).job_ids
    assert len(ids) == len(paths)
    return ids


def end_once(cluster: Cluster, job_ids: Sequence[UUID]) -> None:
    """Every job ends succeeded with exactly one result."""
    assert_one_result_set(cluster, cluster.wait_terminal(job_ids, timeout=120))


def no_bell_waits(cluster: Cluster) -> bool:
    """Every bell was taken and its drain ended: nothing loops through the broker."""
    return bool(cluster.publisher().waiting(QUEUE_SMALL) == 0)


def never_claimed(cluster: Cluster, job_ids: Sequence[UUID]) -> bool:
    return all(
        job.state is JobState.QUEUED
        and job.attempt == 0
        and not any(
            e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.RUNNING
            for e in cluster.store.reads.events(job.id)
        )
        for job in cluster.jobs(job_ids)
    )


def running_in(cluster: Cluster, job_ids: Sequence[UUID], worker_pid: int) -> list[Job]:
    """The jobs running in a pool process of the worker ``worker_pid`` (leases: ``host:pid``)."""
    return [
        job
        for job in cluster.jobs(job_ids)
        if job.state is JobState.RUNNING
        and job.lease_owner
        and parent_of(int(job.lease_owner.rsplit(":", 1)[1])) == worker_pid
    ]


def test_two_workers_racing_on_a_running_cap_never_exceed_it_through_a_kill(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    raw_sql: psycopg.Connection,
    peaks: Callable[[], dict[str, int]],
    tmp_path: Path,
) -> None:
    """Six pool processes in two workers, a tenant capped at 2 with 16 jobs and another
    tenant's 8 beside it: never more than 2 of the capped tenant's running, also while the
    worker that held one lies killed (its jobs' leases run out, the reconciler requeues them), and
    every job ends with exactly one result."""
    cluster = make_cluster(redis_broker, fake_server.url)
    fake_server.configure(delay_s=0.25, delay_tools=[CONVERT])
    tenant(raw_sql, "capped", 2)
    # both workers up before the work: a drain takes every job it may, so a worker started
    # later would find the queue drained
    workers = [cluster.start_worker(concurrency=3) for _ in range(2)]  # each with a beat
    capped = submitted_as(cluster, raw_sql, "capped", write_mixed(tmp_path / "c", 16))
    free = cluster.submit([str(p) for p in write_mixed(tmp_path / "f", 8, start=100)]).job_ids
    victim, doomed = wait_for(
        lambda: next(
            ((jobs[0], w) for w in workers if (jobs := running_in(cluster, capped, w.pid))),
            None,
        ),
        timeout=60,
        message="a capped job running in a worker",
    )
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(30)

    jobs = cluster.wait_terminal([*capped, *free], timeout=180)
    assert_one_result_set(cluster, jobs)
    requeued = [
        e
        for e in cluster.store.reads.events(victim.id)
        if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.QUEUED and e.attempt >= 1
    ]
    assert requeued, "the killed worker's job came back through the reconciler"
    seen = peaks()
    assert seen["capped"] == 2, f"the cap was reached, never passed: {seen}\n{cluster.logs()}"
    assert seen["default"] >= 2, seen


def test_a_paused_tenant_is_never_claimed_while_others_run_and_resumed_loses_nothing(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    raw_sql: psycopg.Connection,
    peaks: Callable[[], dict[str, int]],
    tmp_path: Path,
) -> None:
    cluster = make_cluster(redis_broker, fake_server.url)
    made = cluster.cli_json("tenants", "set", "paused", "--max-running", "0")
    assert made["tenant"]["max_running"] == 0 and made["rung"] == {}
    paused = cluster.submit(
        [str(p) for p in write_mixed(tmp_path / "p", 10)], tenant="paused"
    ).job_ids
    others = cluster.submit([str(p) for p in write_mixed(tmp_path / "o", 6, start=100)]).job_ids
    cluster.start_worker(concurrency=2, beat=False)  # the passes below are the only ones

    done = cluster.wait_terminal(others, timeout=120)
    assert [j.state for j in done] == [JobState.SUCCEEDED] * len(others)
    # The drains served the others' jobs and ended on finding only paused work: no bell
    # loops through the broker, and the reconciler rings nothing for paused work.
    wait_for(lambda: no_bell_waits(cluster), timeout=30, message="the drains to end")
    assert never_claimed(cluster, paused)
    assert "paused" not in peaks()
    for _ in range(2):
        assert cluster.cli_json("reconcile")["rung"] == {}
    assert never_claimed(cluster, paused)

    # Resumed by the operator's command: the limit lifted, and its queue rung at once (the
    # beat's next pass would too, later).
    resumed = cluster.cli_json("tenants", "set", "paused", "--max-running", "none")
    assert resumed["tenant"]["max_running"] is None and resumed["rung"] == {QUEUE_SMALL: 8}
    end_once(cluster, paused)


def test_a_capped_tenants_jobs_are_taken_by_the_drain_that_ends_one(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    raw_sql: psycopg.Connection,
    tmp_path: Path,
) -> None:
    """No reconciler runs: a drain that found the tenant at its cap of 1 ended, and the one
    running its job claims the next when that ends, until every job is done."""
    cluster = make_cluster(redis_broker, fake_server.url, DOCLANE_ROUND_MAX_DOCS="1")
    fake_server.configure(delay_s=0.2, delay_tools=[CONVERT])
    tenant(raw_sql, "one", 1)
    capped = submitted_as(cluster, raw_sql, "one", write_mixed(tmp_path / "c", 6))
    cluster.start_worker(concurrency=2, beat=False)

    end_once(cluster, capped)


def test_a_reconciler_pass_rings_once_a_tenant_has_room(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    raw_sql: psycopg.Connection,
    tmp_path: Path,
) -> None:
    """A pause lifted without the operator's command (a change by hand in psql): the next
    reconciler pass rings the queue, and the worker converts every job once."""
    cluster = make_cluster(redis_broker, fake_server.url)
    tenant(raw_sql, "later", 0)
    paused = submitted_as(cluster, raw_sql, "later", write_mixed(tmp_path / "p", 5))
    cluster.start_worker(concurrency=2, beat=False)
    wait_for(lambda: no_bell_waits(cluster), timeout=60, message="the drains to end")
    assert never_claimed(cluster, paused)

    raw_sql.execute("UPDATE tenants SET max_running = NULL WHERE name = 'later'")
    report = cluster.cli_json("reconcile")
    assert report["rung"] == {QUEUE_SMALL: small_queue_messages(len(paused))}
    end_once(cluster, paused)
