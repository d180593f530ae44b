"""Transient faults are retried: a 429 after its ``Retry-After``, a 503 with backoff, and a
restart of the API in the middle of a ``wait`` (connections refused for a while, then the same
address answers again), blocking and async."""

from __future__ import annotations

import email.utils
import threading
import time

import httpx
import pytest
from doclane_client import Job, JobState, Unavailable
from doclane_client._core import retry_after_s

from tests.fixtures.waiting import wait_for
from tests.support.client_fleet import Fleet, Recording, _error


def test_a_429_is_sent_again_after_its_retry_after(fleet: Fleet) -> None:
    quota = Recording([_error(429, "E115", **{"Retry-After": "1"})])
    with fleet.client(transport=quota) as dl:
        jobs = dl.submit_sources([str(fleet.document("later.md"))])
    assert len(jobs) == 1 and not jobs.rejected
    (_, _, first, refused_at), (_, _, second, sent_at) = quota.log
    assert (first, second) == (429, 202)
    assert sent_at - refused_at >= 1.0  # waited what the API asked, not the policy's backoff


@pytest.mark.anyio
async def test_the_async_client_retries_the_same_way(fleet: Fleet) -> None:
    flaky = Recording([_error(503, "E401"), _error(429, "E115", **{"Retry-After": "0.5"})])
    async with fleet.async_client(transport=flaky) as dl:
        stats = await dl.stats()
    assert stats.jobs is not None
    assert [outcome for _, _, outcome, _ in flaky.log] == [503, 429, 200]
    assert flaky.log[2][3] - flaky.log[1][3] >= 0.5


def _polls(recording: Recording, since: int = 0) -> int:
    return sum(1 for method, *_ in recording.log[since:] if method == "GET")


def _refused(recording: Recording, since: int) -> int:
    return sum(1 for _, _, outcome, _ in recording.log[since:] if isinstance(outcome, str))


def test_a_restart_of_the_api_mid_wait(fleet: Fleet) -> None:
    wire = Recording()
    with fleet.client(transport=wire) as dl:
        jobs = dl.submit_sources([str(fleet.document(f"restart-{n}.md")) for n in range(3)])
        ended: list[Job] = []
        failures: list[BaseException] = []

        def waiting() -> None:
            try:
                ended.extend(dl.wait(jobs, timeout=180))
            except BaseException as exc:
                failures.append(exc)

        waiter = threading.Thread(target=waiting, name="client-wait")
        waiter.start()
        wait_for(lambda: _polls(wire) >= 2, timeout=30, message="the client polling")
        fleet.api.stop()
        stopped = len(wire.log)
        wait_for(lambda: _refused(wire, stopped) >= 2, timeout=30, message="polls refused")
        fleet.start_api()  # the same port
        fleet.start_worker()
        waiter.join(timeout=180)
    assert not waiter.is_alive() and not failures, failures
    assert sorted(str(j.id) for j in ended) == sorted(j.id for j in jobs)
    assert {j.state for j in ended} == {JobState.SUCCEEDED}
    outcomes = [outcome for _, _, outcome, _ in wire.log[stopped:]]
    assert "ConnectError" in outcomes and outcomes[-1] == 200


@pytest.mark.anyio
async def test_a_restart_mid_wait_with_the_async_client(fleet: Fleet) -> None:
    wire = Recording()
    async with fleet.async_client(transport=wire) as dl:
        jobs = await dl.submit_sources([str(fleet.document(f"arestart-{n}.md")) for n in range(2)])
        waiting = dl.wait(jobs, timeout=180)
        fleet.api.stop()  # before the first poll: every poll is refused until it is back
        restarted = threading.Thread(target=lambda: (fleet.start_api(), fleet.start_worker()))
        restarted.start()
        ended = [job async for job in waiting]
        restarted.join(timeout=120)
    assert sorted(str(j.id) for j in ended) == sorted(j.id for j in jobs)
    assert "ConnectError" in [outcome for _, _, outcome, _ in wire.log]


def test_a_post_cut_off_mid_answer_is_sent_again_only_under_its_idempotency_key(
    fleet: Fleet,
) -> None:
    """A submission whose answer was lost may have been made: the client sends it again only
    under the same Idempotency-Key, which the API answers with the first submission's jobs
    (tests/client/test_access.py shows the one job a lost answer leaves)."""
    keys: list[str | None] = []

    class CutOff(Recording):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "POST":
                keys.append(request.headers.get("Idempotency-Key"))
                self._note(request, "ReadError")
                raise httpx.ReadError("connection reset mid-answer", request=request)
            return super().handle_request(request)

    cut = CutOff()
    with fleet.client(transport=cut) as dl, pytest.raises(Unavailable) as lost:
        dl.submit_sources([str(fleet.document("once.md"))])
    assert len(keys) >= 2 and keys[0] and set(keys) == {keys[0]}, keys
    assert {outcome for _, _, outcome, _ in cut.log} == {"ReadError"}
    assert lost.value.code == "unreachable" and isinstance(lost.value.__cause__, httpx.ReadError)

    with fleet.client(transport=cut) as dl:
        assert dl.stats().jobs is not None  # a GET goes through the same transport untouched


def test_retry_after_as_seconds_or_as_a_date() -> None:
    def after(value: str) -> float | None:
        return retry_after_s(httpx.Response(429, headers={"Retry-After": value}))

    assert after("7") == 7.0 and after("0.5") == 0.5 and after("-3") == 0.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (after(later) or 0) <= 31
    assert after("soon") is None and retry_after_s(httpx.Response(429)) is None
