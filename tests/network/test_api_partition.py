"""The API host cut from PostgreSQL or from the broker (a black hole): it says so, loses nothing.

Cut from PostgreSQL, ``/readyz`` answers 503 naming the database within its deadline, a
submission answers 503 with E401 and leaves no job behind (none half-taken), and once healed
everything answers again and a submission is taken and converted once. Cut from the broker, a
submission is taken and answered within the publish's socket deadline, and its jobs are rung
for by the reconciler."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from pipeline.jobs.model import JobState
from tests.fixtures.api_server import ApiServer
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.network.fleet import Fleet, figures, write_figures
from tests.support.network.hosts import Host

pytestmark = pytest.mark.network


def test_the_api_host_cut_from_postgresql_refuses_with_503_and_answers_again_when_healed(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    fleet = make_fleet(DOCLANE_DATABASE_TCP_TIMEOUT_S="4")
    cluster, api_host, api = _api_beside_a_worker(fleet, tmp_path)
    body = {"sources": [str(write_sample(tmp_path / "docs", "md", 1))]}
    first = api.post("/v1/jobs", json=body)
    assert first.status_code == 202, first.text
    assert api.get("/readyz", token=None).status_code == 200

    api_host.cut(fleet.database.port)
    began = time.monotonic()
    ready = api.get("/readyz", token=None)
    assert ready.status_code == 503, ready.text
    assert ready.json()["parts"]["database"] != "ok"
    assert time.monotonic() - began < 25, "readyz answered within its deadline"
    refused = api.post("/v1/jobs", json=body)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "E401", refused.text

    api_host.heal()
    healed = time.monotonic()
    wait_for(
        lambda: api.get("/readyz", token=None).status_code == 200,
        timeout=60,
        interval=0.5,
        message="readyz after the heal",
    )
    body = {"sources": [str(write_sample(tmp_path / "docs", "md", 2))]}
    again = api.post("/v1/jobs", json=body)
    heal_to_rate = time.monotonic() - healed
    assert again.status_code == 202, again.text
    ids = [*_ids(first.json()), *_ids(again.json())]
    jobs = cluster.wait_terminal(ids, timeout=90)
    assert all(j.state is JobState.SUCCEEDED for j in jobs)
    every = _all_job_ids(fleet)
    assert sorted(every) == sorted(ids), "the refused submission left no job behind"
    row = figures("API host cut from PostgreSQL", cluster, ids, heal_to_rate_s=heal_to_rate)
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)


def test_a_submission_to_an_api_host_cut_from_the_broker_is_taken_and_rung_by_the_reconciler(
    make_fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    """A black hole to the broker (Redis): the submission's bell never gets a reply. The
    publish gives up at its socket deadline (kombu sets none: without doclane's the request
    waited on the kernel's retransmissions, past the client's 30 s), the job is taken (202,
    ``published`` false) and waits in PostgreSQL, and the worker host's reconciler rings for it.
    Healed, the API's bells reach the broker again."""
    fleet = make_fleet(DOCLANE_RECONCILE_INTERVAL_S="1")
    cluster, api_host, api = _api_beside_a_worker(fleet, tmp_path)

    def submit(number: int) -> tuple[list[UUID], list[bool], float]:
        began = time.monotonic()
        answer = api.post("/v1/jobs", json={"sources": [str(write_sample(tmp_path, "md", number))]})
        assert answer.status_code == 202, answer.text
        published = [accepted["published"] for accepted in answer.json()["accepted"]]
        return _ids(answer.json()), published, time.monotonic() - began

    first, published, _ = submit(1)  # the API's broker connection is up, then goes silent
    assert published == [True]
    api_host.cut(fleet.broker.port)
    cut_ids, published, waited = submit(2)
    print(f"a submission into the black hole answered in {waited:.1f}s")
    assert published == [False], "the bell was refused, not left hanging"
    assert waited < 20, f"the submission waited {waited:.1f}s on the broker's black hole"
    jobs = cluster.wait_terminal(cut_ids, timeout=60)
    assert all(j.state is JobState.SUCCEEDED for j in jobs), "the reconciler rang for it"
    assert "cannot ring" in api.log()

    api_host.heal()
    healed = time.monotonic()
    again, published, _ = submit(3)  # the connection that timed out was dropped: a new one
    heal_to_rate = time.monotonic() - healed
    assert published == [True], "the first bell after the heal reached the broker"
    ids = [*first, *cut_ids, *again]
    cluster.wait_terminal(ids, timeout=60)
    row = figures("API host cut from the broker", cluster, ids, heal_to_rate_s=heal_to_rate)
    assert (row.lost, row.doubled) == (0, 0), row
    write_figures(row)


def _api_beside_a_worker(fleet: Fleet, folder: Path) -> tuple[Cluster, Host, ApiServer]:
    """The fleet's cluster, and two hosts: one running ``doclane api``, one a worker."""
    cluster = fleet.cluster
    assert cluster is not None
    api_host, worker_host = fleet.add_host(), fleet.add_host()
    fleet.start_worker(worker_host, concurrency=1)
    return cluster, api_host, fleet.start_api(api_host, folder)


def _ids(answer: dict[str, Any]) -> list[UUID]:
    return [UUID(accepted["job_id"]) for accepted in answer["accepted"]]


def _all_job_ids(fleet: Fleet) -> list[UUID]:
    """Every job in the database, read on loopback (the test is beside the services)."""
    assert fleet.cluster is not None
    with psycopg.connect(fleet.database_url) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM jobs")]
