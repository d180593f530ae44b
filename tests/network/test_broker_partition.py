"""A worker host cut from the broker and from Redis (the breaker's state) mid-run.

The conversions it has in flight need neither: they finish and are stored. The other host goes
on taking the broker's bells. Work whose bell is lost (its submitter's publish never reached
the broker) waits for no bell: the other host's reconciler rings every queue with claimable
work, so it is claimed within a reconcile interval and what a pass may take besides, by the
database's own clock. When the link heals, the cut host reconnects and takes new work in the
same processes, without a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs.model import JobState, Stage
from pipeline.queues import QUEUE_MEDIUM, SMALL_BELOW_BYTES, RecordingPublisher
from tests.fixtures.processes import parent_of
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.network.fleet import (
    Fleet,
    changes_to,
    figures,
    pool_pid,
    succeeded_in,
    write_figures,
)

pytestmark = pytest.mark.network

CONVERT = "convert_document_into_docling_document"
#: The reconciler's interval here (beat sends a pass this often).
RECONCILE_S = 1.0
#: What a lost bell may cost beyond the interval until beat sends the next pass: that pass may
#: wait one more interval on the control queue (it expires then, and the next replaces it), and
#: the pass itself, its bell and the drain's claim take a moment (2 s on this loaded machine).
LOST_BELL_BOUND_S = RECONCILE_S + 2.0


def write_medium(folder: Path, number: int) -> Path:
    """A PDF of the medium tier (a header and padding: the fake converts it by its size): its
    queue has no bell left over from the small documents' drains, so only a bell rung for it
    starts a drain that claims it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"medium-{number:04d}.pdf"
    with path.open("wb") as out:
        out.write(f"%PDF-1.4\n% medium sample {number}\n".encode())
        out.truncate(SMALL_BELOW_BYTES + number)
    return path


def test_a_host_cut_from_the_broker_and_redis_finishes_what_it_holds_and_catches_up(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    fleet = make_fleet(DOCLANE_RECONCILE_INTERVAL_S=str(RECONCILE_S))
    cluster = fleet.cluster
    assert cluster is not None
    a, b = fleet.add_host(), fleet.add_host()
    fleet.fakes[0].configure(delay_s=1.0, delay_tools=[CONVERT])
    worker_a = fleet.start_worker(a, concurrency=1, beat=False)
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", n) for n in range(10)]).job_ids

    def a_converting() -> dict[UUID, int]:
        return {
            j.id: pool_pid(j.lease_owner)
            for j in cluster.jobs(ids)
            if j.state is JobState.RUNNING
            and j.stage is Stage.CONVERTING
            and j.lease_owner is not None
            and parent_of(pool_pid(j.lease_owner)) == worker_a.pid
        }

    held = wait_for(a_converting, timeout=60, message="host A converting")
    pids_a = set(held.values())
    a.cut(fleet.broker.port)
    a.cut(fleet.redis.port)
    worker_b = fleet.start_worker(b, concurrency=1)

    jobs = cluster.wait_terminal(ids, timeout=150)
    assert all(j.state is JobState.SUCCEEDED for j in jobs), [j.state for j in jobs]
    assert all(j.attempt == 1 for j in jobs if j.id in held), "A stored what it held, once"

    # Work whose bells are lost, in a queue no drain is on: only a bell rung for it (the
    # reconciler's wake-up) starts one.
    fleet.fakes[0].configure(delay_s=0)
    rung_before = worker_b.log().count("bells rung on doclane.medium")
    lost = cluster.submit(
        [write_medium(tmp_path / "lost", n) for n in range(2)], publisher=RecordingPublisher()
    ).job_ids
    assert {j.queue for j in cluster.jobs(lost)} == {QUEUE_MEDIUM}
    cluster.wait_terminal(lost, timeout=30)
    histories = [cluster.store.reads.events(job_id) for job_id in lost]
    queued_at = max(changes_to(events, JobState.QUEUED)[0].at for events in histories)
    claimed_at = min(changes_to(events, JobState.RUNNING)[0].at for events in histories)
    waited = (claimed_at - queued_at).total_seconds()
    print(f"work whose bells were lost claimed {waited:.2f}s after it was queued")
    assert worker_b.log().count("bells rung on doclane.medium") > rung_before, "B's pass rang"
    assert waited <= RECONCILE_S + LOST_BELL_BOUND_S, f"waited {waited:.2f}s on a lost bell"

    a.heal()
    healed = time.monotonic()
    worker_b.stop()
    more = cluster.submit([write_sample(tmp_path / "more", "md", 100 + n) for n in range(3)])
    done = cluster.wait_terminal(more.job_ids, timeout=120)
    assert all(j.state is JobState.SUCCEEDED for j in done)
    assert succeeded_in(cluster, more.job_ids) == pids_a, "A's pool process was never replaced"
    assert worker_a.popen.poll() is None, "host A's worker was never restarted"
    row = figures(
        "worker host cut from the broker and Redis", cluster, [*ids, *lost, *more.job_ids]
    )
    row.heal_to_rate_s = time.monotonic() - healed
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)
