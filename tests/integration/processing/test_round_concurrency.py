"""A round's concurrency fitted to what its servers really run at once.

In process against real servers: the fake docling-mcp (its contract converts one document at a
time), a pool of two of them, the fake's per-format contract, and the real docling-rs-mcp, whose
``--concurrency`` a stdio child's command says. ``DOCLANE_SERVER_CONCURRENCY`` is left unset
(the fit) unless a test says otherwise; batches are off so that every small job goes in a round.
"""

from __future__ import annotations

import itertools
import shlex
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pipeline.mcp.client import McpClient
from pipeline.mcp.endpoints import stdio_endpoint
from pipeline.processing.concurrency import ServerConcurrency
from pipeline.processing.outcomes import OutcomeKind
from pipeline.resilience.facade import Resilient, build_resilient
from pipeline.settings.tree import read_settings
from tests.fixtures.docling_rs_server import DoclingRsServer, docling_rs_command
from tests.fixtures.fake_server import FakeServer, FakeServerFactory
from tests.support.processing import Bench, HookedRunner, assert_succeeded_once, submit_samples

T = TypeVar("T")

#: How long the first unit of a round waits for a second one beside it: only a round that
#: runs two at once ends the wait early (the test then fails); one that runs one at a time
#: always waits it out.
SECOND_UNIT_WAIT_S = 3.0


def fitted_bench(
    make_bench: Callable[..., Bench], processing: dict[str, Any] | None = None, **options: Any
) -> Bench:
    """Rounds of 8, batches off, ``DOCLANE_SERVER_CONCURRENCY`` unset (and ``processing``)."""
    return make_bench(
        batches=True,
        processing={
            "batch_max_docs": 1,
            "round_max_docs": 8,
            "server_concurrency": None,
            **(processing or {}),
        },
        **options,
    )


class UnitsInside:
    """The most units of work inside at once. The first one to finish waits for a second to
    come in beside it (up to ``SECOND_UNIT_WAIT_S``), so that a round that would run two at
    once shows it whatever the scheduling; ``meet`` > 1 makes that many meet instead (a round
    that runs fewer at once fails on the barrier)."""

    def __init__(self, runner: HookedRunner, meet: int = 1) -> None:
        self.most = 0
        self._inside = 0
        self._lock = threading.Lock()
        self._second = threading.Event()
        self._waited = False
        self._meeting = threading.Barrier(meet, timeout=30) if meet > 1 else None
        runner.wrap_client, runner.after_unit = self._enter, self._leave

    def _enter(self, client: McpClient) -> McpClient:
        with self._lock:
            self._inside += 1
            self.most = max(self.most, self._inside)
            if self._inside > 1:
                self._second.set()
        return client

    def _leave(self) -> None:
        with self._lock:
            first, self._waited = not self._waited, True
        if self._meeting is not None:
            if first or self._meeting.n_waiting:
                self._meeting.wait()
        elif first:
            self._second.wait(timeout=SECOND_UNIT_WAIT_S)
        with self._lock:
            self._inside -= 1


def test_one_docling_mcp_gets_no_round_its_jobs_go_alone(
    make_bench: Callable[..., Bench],
) -> None:
    """One server that converts one document at a time: a round would convert them one after
    the other anyway, and only add its steps; each claim takes one job, and the drain takes
    the eight one after another (a budget of ``DOCLANE_ROUND_MAX_S`` no machine runs out of
    here)."""
    bench = fitted_bench(make_bench, processing={"round_max_s": 600})
    ids = submit_samples(bench, 8)
    units = UnitsInside(bench.runner)

    drained = bench.processor.drain("doclane.small")

    assert (drained.jobs, drained.stopped) == (8, "empty")
    for number, job_id in enumerate(ids, start=1):
        assert_succeeded_once(bench, job_id, number)
    jobs = sorted(bench.store.reads.get_jobs(ids), key=lambda j: j.started_at or j.created_at)
    assert all(
        a.finished_at is not None and b.started_at is not None and a.finished_at <= b.started_at
        for a, b in itertools.pairwise(jobs)
    ), "each claim took one job, the next once it was stored: no round"
    assert units.most == 1, "docling-mcp converts one at a time: a second call only contends"
    assert bench.server.stats()["max_tool_calls_in_flight"] == 1


def test_a_round_over_a_pool_of_two_docling_mcp_converts_one_on_each(
    make_bench: Callable[..., Bench],
    fake_server: FakeServer,
    fake_server_factory: FakeServerFactory,
) -> None:
    second = fake_server_factory()
    bench = fitted_bench(make_bench, pool=[second])
    ids = submit_samples(bench, 8)
    units = UnitsInside(bench.runner, meet=2)  # two units must be inside at once to go on

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    for number, job_id in enumerate(ids, start=1):
        assert_succeeded_once(bench, job_id, number)
    assert units.most == 2
    for server in (fake_server, second):
        stats = server.stats()
        assert stats["max_tool_calls_in_flight"] == 1, "one at a time on each server"
        assert stats["requests_by_tool"], "both servers converted"


def test_the_setting_wins_over_the_fit(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench(
        batches=True,
        processing={"batch_max_docs": 1, "round_max_docs": 8, "server_concurrency": 2},
    )
    ids = submit_samples(bench, 8)
    units = UnitsInside(bench.runner, meet=2)

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    assert units.most == 2, "two at once on one docling-mcp, as the setting says"


# ---- what each server runs at once ------------------------------------------------------------


@pytest.fixture
def resilient_over() -> Iterator[Callable[..., Resilient]]:
    """``make(*endpoints, **mcp settings)``: the resilience layer over those servers."""
    made: list[Resilient] = []

    def make(*endpoints: str, **mcp: Any) -> Resilient:
        resilient = build_resilient(
            read_settings(mcp=mcp).mcp, read_settings().resilience, endpoints=list(endpoints)
        )
        made.append(resilient)
        return resilient

    yield make
    for resilient in made:
        resilient.close()


def fit(resilient: Resilient, setting: int | None = None) -> ServerConcurrency:
    return ServerConcurrency(resilient, read_settings().profiles, setting)


def rs_child(root: Path, *extra: str) -> str:
    """The endpoint of a docling-rs-mcp child with ``extra`` arguments."""
    return stdio_endpoint(shlex.join(docling_rs_command([root], *extra)))


def test_a_docling_mcp_runs_one_at_a_time_and_a_per_format_server_is_not_told(
    resilient_over: Callable[..., Resilient],
    fake_server: FakeServer,
    fake_server_factory: FakeServerFactory,
) -> None:
    per_format = fake_server_factory(profile="per-format")

    assert fit(resilient_over(fake_server.url))() == 1
    assert fit(resilient_over(per_format.url))() == 1
    assert fit(resilient_over(fake_server.url, per_format.url))() == 2


def test_each_server_is_asked_once_and_one_that_did_not_answer_again(
    resilient_over: Callable[..., Resilient],
    fake_server: FakeServer,
    fake_server_factory: FakeServerFactory,
) -> None:
    second = fake_server_factory()
    second.configure(fail_next=1, fail_with="http503", fail_methods=["initialize"])
    servers = AskedServers(resilient_over(fake_server.url, second.url))
    concurrency = ServerConcurrency(servers, read_settings().profiles, None)

    assert concurrency() == 1, "the second server did not answer: it counts for nothing yet"
    assert concurrency() == 2, "asked again, it answers"
    assert concurrency() == 2
    assert servers.asked == 2, "once every server has answered, none is asked again"


@dataclass
class AskedServers:
    """The resilience layer, counting how often every server was asked."""

    resilient: Resilient
    asked: int = 0

    def on_each_server(self, look: Callable[[McpClient], T]) -> list[T | None]:
        self.asked += 1
        return self.resilient.on_each_server(look)


def test_the_setting_asks_no_server(
    resilient_over: Callable[..., Resilient], fake_server: FakeServer
) -> None:
    assert fit(resilient_over(fake_server.url), setting=5)() == 5
    assert fake_server.stats()["requests_by_method"] == {}


@pytest.mark.docling
def test_docling_rs_mcp_runs_its_concurrency_at_once(
    resilient_over: Callable[..., Resilient],
    tmp_path: Path,
    docling_rs_server: DoclingRsServer,
    fake_server: FakeServer,
) -> None:
    assert fit(resilient_over(rs_child(tmp_path, "--concurrency", "3")))() == 3
    assert fit(resilient_over(rs_child(tmp_path, "--concurrency=4")))() == 4
    assert fit(resilient_over(rs_child(tmp_path)))() == 2, "its default"
    over_http = resilient_over(docling_rs_server.url, auth="bearer", token=docling_rs_server.token)
    assert fit(over_http)() == 2, "over HTTP it does not say: its default"
    pool = resilient_over(fake_server.url, rs_child(tmp_path, "--concurrency", "3"))
    assert fit(pool)() == 1 + 3
