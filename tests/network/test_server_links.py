"""A worker host's link to one of two MCP servers goes bad; the fleet converts on the other.

A black hole (packets dropped both ways, no reset): the calls in flight never answer and never
fail, so only the size-based deadline ends them (E303); the breaker opens for that server's
origin alone, and the jobs go to the other server. Healed, the breaker's half-open trial passes,
it closes, and the server takes jobs again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from uuid import UUID

import pytest
import redis

from pipeline.jobs.model import EventKind, JobState
from pipeline.mcp.endpoints import origin_of
from tests.fixtures.brokers import REDIS_HOST, REDIS_PORT
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.network.fleet import CONVERT_TOOLS, Fleet, changes_to, figures, write_figures

pytestmark = pytest.mark.network

CONVERT = "convert_document_into_docling_document"

#: Short deadlines, so that a hung call ends in seconds (small documents: the small tier).
DEADLINES = {
    "DOCLANE_TIMEOUT_SMALL_S": "3",
    "DOCLANE_TIMEOUT_MEDIUM_S": "3",
    "DOCLANE_TIMEOUT_LARGE_S": "3",
    "DOCLANE_MCP_REQUEST_TIMEOUT_S": "3",
    "DOCLANE_MCP_CONNECT_TIMEOUT_S": "2",
}


#: The breaker's reset in the black-hole scenario: a wait that a job refused by a circuit shared
#: with the cut server would show, far above the other server's conversion (0.5 s).
RESET_S = 5


def breaker_state(origin: str) -> str:
    namespace = os.environ["DOCLANE_BREAKER_NAMESPACE"]  # the isolation fixture's, per test
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=0)
    try:
        raw = client.get(f"{namespace}:{origin}:pybreaker:state")
        return raw.decode() if isinstance(raw, bytes) else "closed"
    finally:
        client.close()


def times_opened(origin: str) -> int:
    """How often the fleet's circuit of ``origin`` opened (the breaker's transitions hash)."""
    namespace = os.environ["DOCLANE_BREAKER_NAMESPACE"]
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=0)
    try:
        return int(client.hget(f"{namespace}:{origin}:transitions", "open") or 0)
    finally:
        client.close()


def converted_by(cluster: Cluster, job_ids: list, since: float = 0.0) -> dict[str, int]:  # type: ignore[type-arg]
    """How many successful conversions each origin made (since a wall-clock time)."""
    counts: dict[str, int] = {}
    for job_id in job_ids:
        for event in cluster.store.reads.events(job_id):
            if (
                event.kind is EventKind.MCP_CALL
                and event.outcome == "ok"
                and event.tool in CONVERT_TOOLS
                and event.at.timestamp() >= since
            ):
                origin = event.server_origin or "?"
                counts[origin] = counts.get(origin, 0) + 1
    return counts


def waited_for_a_circuit(cluster: Cluster, job_ids: Sequence[UUID]) -> list[UUID]:
    """The jobs sent back to wait because every circuit was open (``retrying`` with E309)."""
    return [
        job_id
        for job_id in job_ids
        for event in changes_to(cluster.store.reads.events(job_id), JobState.RETRYING)
        if event.error_code == "E309"
    ]


def after_the_hung_try(
    cluster: Cluster, job_ids: Sequence[UUID], origin: str
) -> list[float | None]:
    """For each job with a try on ``origin`` ended at its deadline (E303): how long the rest of
    that attempt took to success (claim to success, less the hung try: the database's clock
    and the trail's durations), or None when another attempt succeeded instead."""
    spent: list[float | None] = []
    for job_id in job_ids:
        events = cluster.store.reads.events(job_id)
        hung = [
            e
            for e in events
            if e.kind is EventKind.MCP_CALL and e.server_origin == origin and e.error_code == "E303"
        ]
        if not hung:
            continue
        [won] = changes_to(events, JobState.SUCCEEDED)
        [claim] = [e for e in changes_to(events, JobState.RUNNING) if e.attempt == won.attempt]
        if {e.attempt for e in hung} != {won.attempt}:
            spent.append(None)
            continue
        hung_s = sum(e.duration_ms or 0.0 for e in hung) / 1000.0
        spent.append((won.at - claim.at).total_seconds() - hung_s)
    return spent


def call_errors(cluster: Cluster, job_ids: list, origin: str) -> set[str]:  # type: ignore[type-arg]
    return {
        event.error_code
        for job_id in job_ids
        for event in cluster.store.reads.events(job_id)
        if event.kind is EventKind.MCP_CALL
        and event.server_origin == origin
        and event.error_code is not None
    }


def test_a_black_hole_to_one_server_opens_its_breaker_alone_and_the_fleet_converts_on_the_other(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    # One failure opens a circuit here: a drain routes by load, so after its first hung calls
    # the cut server carries in-flight units and is rarely picked again (two meetings in ten
    # jobs, measured), too few for the default of five; how many it meets is scheduling's.
    fleet = make_fleet(
        servers=2,
        DOCLANE_ROUND_MAX_DOCS="1",
        DOCLANE_BREAKER_FAIL_MAX="1",
        DOCLANE_BREAKER_RESET_S=str(RESET_S),
        **DEADLINES,
    )
    cluster = fleet.cluster
    assert cluster is not None
    host = fleet.add_host()
    fleet.start_worker(host, concurrency=3)
    bad, good = (origin_of(fleet.origin_of(s)) for s in fleet.servers)
    # Warm: both servers shaken hands with, connections open (the black hole meets them).
    warm = cluster.submit([write_sample(tmp_path / "warm", "md", n) for n in range(4)]).job_ids
    cluster.wait_terminal(warm, timeout=90)
    wait_for(lambda: len(converted_by(cluster, warm)) == 2, timeout=5, message="both servers used")

    host.cut(fleet.servers[0].port)
    # The other server slower: its units in flight make the cut one the least loaded now and
    # then, so units keep meeting the black hole until its circuit opens.
    fleet.fakes[1].configure(delay_s=0.5, delay_tools=[CONVERT])
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", 10 + n) for n in range(10)]).job_ids
    jobs = cluster.wait_terminal(ids, timeout=180)

    assert all(j.state is JobState.SUCCEEDED for j in jobs), [(j.state, j.error_code) for j in jobs]
    assert "E303" in call_errors(cluster, ids, bad), "a hung call ended by its deadline"
    assert times_opened(bad) >= 1, "the black-holed server's circuit opened"
    assert times_opened(good) == 0, "the other server's circuit never opened"
    # What keying by origin is for: the open circuit refuses the cut server alone, so a job
    # whose try hung there goes on at once on the other server; a breaker shared by the two
    # would refuse both until its reset.
    assert waited_for_a_circuit(cluster, ids) == [], "no job waited for a circuit to close"
    rest = after_the_hung_try(cluster, ids, bad)
    assert rest, "a job met the black hole"
    assert all(r is not None and r < RESET_S for r in rest), f"the other server at once: {rest}"
    assert converted_by(cluster, ids).get(good, 0) >= 1
    cut_row = figures("black hole to one MCP server", cluster, [*warm, *ids])
    assert (cut_row.lost, cut_row.doubled) == (0, 0), cut_row

    host.heal()
    fleet.fakes[1].configure(delay_s=0)
    healed = time.time()
    started = time.monotonic()
    after: list = []  # type: ignore[type-arg]

    def bad_server_converts_again() -> bool:
        after.extend(
            cluster.submit(
                [write_sample(tmp_path / f"after{len(after)}", "md", 500 + len(after))]
            ).job_ids
        )
        cluster.wait_terminal(after, timeout=60)
        return converted_by(cluster, after, since=healed).get(bad, 0) >= 1

    wait_for(bad_server_converts_again, timeout=90, interval=0.5, message="the server back")
    assert breaker_state(bad) == "closed"
    row = figures("black hole to one MCP server", cluster, [*warm, *ids, *after])
    row.heal_to_rate_s = time.monotonic() - started
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)


def test_replies_lost_one_way_end_at_the_deadline_and_the_fleet_converts_on_the_other_server(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    """One-way loss: the worker's requests reach the server (it counts them), its replies never
    come back. The same guards as a black hole must end it: the deadline, then the breaker."""
    fleet = make_fleet(servers=2, DOCLANE_ROUND_MAX_DOCS="1", **DEADLINES)
    cluster = fleet.cluster
    assert cluster is not None
    host = fleet.add_host()
    fleet.start_worker(host, concurrency=3)
    bad, good = (origin_of(fleet.origin_of(s)) for s in fleet.servers)
    warm = cluster.submit([write_sample(tmp_path / "warm", "md", n) for n in range(4)]).job_ids
    cluster.wait_terminal(warm, timeout=90)
    reached_before = fleet.fakes[0].stats()["requests_by_tool"].get(CONVERT, 0)

    host.cut(fleet.servers[0].port, "in")
    fleet.fakes[1].configure(delay_s=0.5, delay_tools=[CONVERT])
    ids = cluster.submit([write_sample(tmp_path / "docs", "md", 10 + n) for n in range(10)]).job_ids
    jobs = cluster.wait_terminal(ids, timeout=180)
    host.heal()

    assert all(j.state is JobState.SUCCEEDED for j in jobs), [(j.state, j.error_code) for j in jobs]
    reached = fleet.fakes[0].stats()["requests_by_tool"].get(CONVERT, 0) - reached_before
    assert reached >= 1, "the requests reached the server"
    assert "E303" in call_errors(cluster, ids, bad), "the unanswered call ended by its deadline"
    assert times_opened(good) == 0
    row = figures("replies from one MCP server lost", cluster, [*warm, *ids])
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)
