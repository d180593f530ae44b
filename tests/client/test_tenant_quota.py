"""A real 429: a tenant's queue full (E115), answered with the API's ``Retry-After``.

The tenant is made as an operator makes it (a token carrying ``"tenant"`` in
DOCLANE_API_TOKENS, ``doclane tenants set NAME --max-queued 1``), no worker runs (its one job
stays queued), and a second submission is refused whole: 429, the E115 body, ``Retry-After``
from the tenant's finishing rate (pipeline/api/quota.py: 60 s when it finished nothing lately,
``ceil(300 / finished in the last 5 minutes)`` otherwise). So:

* a tenant that finished nothing is told 60 s, more than this client's cap: ``QuotaExceeded``
  is raised at once, carrying ``retry_after``, after one request;
* a tenant that finished 150 jobs (submitted and cancelled here) is told 2 s: the client waits
  that long and sends the submission again; the room is made on the first refusal (its queued
  job cancelled), so the second try is accepted.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable

import httpx
import pytest
from doclane_client import AsyncClient, Client, QuotaExceeded, RetryPolicy

from tests.support.client_fleet import Fleet, Recording

#: Waits up to 5 s for a Retry-After; a longer one is raised at once.
POLICY = RetryPolicy(attempts=3, total_s=60, initial_s=0.05, max_wait_s=1, max_retry_after_s=5)
#: Jobs the tenant finishes before its quota is hit: 300 s / 150 = a Retry-After of 2 s.
FINISHED = 150


def tenant_token(fleet: Fleet, tenant: str, max_queued: int) -> str:
    """A submit token of ``tenant`` (the API restarted to take it, making the tenant), and the
    tenant's queue quota set by ``doclane tenants set``."""
    token = secrets.token_urlsafe(16)
    entries = [{"name": f"{r}-client", "role": r, "token": t} for r, t in fleet.tokens.items()]
    entries.append({"name": tenant, "role": "submit", "token": token, "tenant": tenant})
    fleet.api_env["DOCLANE_API_TOKENS"] = json.dumps(entries)
    fleet.restart_api()
    fleet.cluster.cli("tenants", "set", tenant, "--max-queued", str(max_queued))
    return token


def refusals(wire: Recording) -> list[tuple[int | str, float]]:
    return [(outcome, at) for method, path, outcome, at in wire.log if method == "POST"]


def test_a_retry_after_above_the_cap_is_raised_at_once_with_it(fleet: Fleet) -> None:
    token = tenant_token(fleet, "team-a", max_queued=1)
    wire = Recording()
    with fleet.client(token, transport=wire, retries=POLICY) as dl:
        first = dl.submit_sources([str(fleet.document("first.md"))])
        assert len(first) == 1  # no worker: it stays queued, the queue is full
        with pytest.raises(QuotaExceeded) as full:
            dl.submit_sources([str(fleet.document("second.md"))])
        assert dl.job(first[0]).job.tenant == "team-a"
    error = full.value
    assert (error.status, error.code, error.retryable) == (429, "E115", True)
    assert error.retry_after == 60  # the tenant finished nothing: the API's idle answer
    assert error.detail["rejected"][0]["code"] == "E115"
    assert [outcome for outcome, _ in refusals(wire)] == [202, 429]  # not sent again


class MakingRoom(Recording):
    """The wire, recorded; on the first 429, the tenant's queued job is cancelled (room made
    while the client waits), and the ``Retry-After`` it was told is kept."""

    def __init__(self, make_room: Callable[[], None]) -> None:
        super().__init__()
        self.make_room = make_room
        self.told: list[float] = []

    def _seen(self, response: httpx.Response) -> httpx.Response:
        if response.status_code == 429 and not self.told:
            self.told.append(float(response.headers["Retry-After"]))
            self.make_room()
        return response

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._seen(super().handle_request(request))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self._seen(await super().handle_async_request(request))


@pytest.mark.anyio
@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_a_full_queue_is_sent_again_after_retry_after(fleet: Fleet, driver: str) -> None:
    token = tenant_token(fleet, "team-b", max_queued=FINISHED + 1)
    with fleet.client(token) as dl:  # a finishing rate: FINISHED jobs ended within the window
        gone = dl.submit_sources([str(fleet.document(f"gone-{n}.md")) for n in range(FINISHED)])
        assert len(gone) == FINISHED
        for job in gone:
            dl.cancel(job)
    fleet.cluster.cli("tenants", "set", "team-b", "--max-queued", "1")
    with fleet.client(token) as dl:
        queued = dl.submit_sources([str(fleet.document("queued.md"))])[0]

    def make_room() -> None:
        with fleet.client(token) as other:
            other.cancel(queued)

    wire = MakingRoom(make_room)
    later = [str(fleet.document("later.md"))]
    if driver == "sync":
        with Client(fleet.url, token, transport=wire, retries=POLICY) as dl:
            accepted = dl.submit_sources(later)
    else:
        async with AsyncClient(fleet.url, token, transport=wire, retries=POLICY) as adl:
            accepted = await adl.submit_sources(later)
    assert len(accepted) == 1 and not accepted.rejected
    assert wire.told == [2.0]  # ceil(300 s / 150 finished)
    (refused, at_refusal), (answer, at_answer) = refusals(wire)
    assert (refused, answer) == (429, 202)
    assert at_answer - at_refusal >= wire.told[0]
