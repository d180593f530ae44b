"""``--priority`` through a real worker on both brokers: waiting jobs leave by priority."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from pipeline.jobs.model import EventKind, JobState
from pipeline.queues import QUEUE_SMALL
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster


def _waiting(cluster: Cluster, queue: str) -> int | None:
    """Messages ready in ``queue``, as the reconciler reads them (every priority level)."""
    return cluster.publisher().waiting(queue)


def _first_claim(cluster: Cluster, job_id: UUID) -> int:
    """The id of the job's first ``running`` event: event ids grow with every insert, and one
    worker process claims one job at a time, so they order the claims without any clock."""
    return min(
        e.id
        for e in cluster.store.reads.events(job_id)
        if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.RUNNING
    )


def test_waiting_jobs_are_claimed_by_priority_then_in_order(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    # A job a claim (rounds off): the order under test is the claim's, not a round's.
    cluster = make_cluster(any_broker, fake_server.url, DOCLANE_ROUND_MAX_DOCS="1")
    docs = tmp_path / "docs"
    # Small markdown files: every job lands on one queue, so the order is the broker's own
    # (on RabbitMQ priorities only order messages within a queue). No worker runs yet.
    lows = cluster.submit([write_sample(docs, "md", n) for n in range(4)]).job_ids
    below = cluster.submit([write_sample(docs, "md", 10)], priority=-7).job_ids  # counts as 0
    middle = cluster.submit([write_sample(docs, "md", 20)], priority=3).job_ids
    high = cluster.submit([write_sample(docs, "md", 30)], priority=100).job_ids  # counts as 9
    job_ids = [*lows, *below, *middle, *high]
    assert len(job_ids) == 7
    assert {j.queue for j in cluster.jobs(job_ids)} == {QUEUE_SMALL}
    # Every bell is in the broker before any consumer exists (a publish is not a round trip
    # on RabbitMQ: ask the broker): a bell a job, up to eight a submission; whichever bell
    # comes first, the claim takes the jobs by priority, then in order.
    wait_for(
        lambda: _waiting(cluster, QUEUE_SMALL) == 7,
        timeout=30,
        message="every message waiting in the broker",
    )

    # One pool process, prefetch 1 per process, late acks: the worker holds one unacknowledged
    # message at a time and fetches the next only when the job it holds has ended, so it
    # claims in the order the broker delivers. No beat: no reconciler republishes anything.
    cluster.start_worker(concurrency=1, beat=False)
    jobs = cluster.wait_terminal(job_ids)

    assert [j.state for j in jobs] == [JobState.SUCCEEDED] * len(job_ids), cluster.logs()
    claimed = sorted(job_ids, key=lambda job_id: _first_claim(cluster, job_id))
    # Highest priority first, then the middle one, then the four of one submission in their
    # order (equally old: their ids ascend in the order they were given), then the one
    # submitted with -7: the broker files it with priority 0, the database's lanes below it.
    assert claimed == [*high, *middle, *lows, *below], cluster.logs()
