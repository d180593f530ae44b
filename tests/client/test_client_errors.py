"""Every refusal becomes its exception, with the catalog code and texts: from the real API where
it can be made to refuse, from answers made up in front of it where it cannot (a 500, a 503 that
lasts, a 429 before the tenants' quotas exist on main)."""

from __future__ import annotations

import httpx
import pytest
from doclane_client import (
    AuthError,
    DoclaneError,
    Forbidden,
    InvalidInput,
    JobFailed,
    NotFound,
    QuotaExceeded,
    ResultExpired,
    ServerError,
    Unavailable,
    WaitTimeout,
    WrongState,
)

from tests.fixtures.waiting import wait_for
from tests.support.client_fleet import FAST, Fleet, Recording, _error

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def test_tokens_and_roles(fleet: Fleet) -> None:
    with fleet.client("not-a-token") as dl, pytest.raises(AuthError) as refused:
        dl.stats()
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    assert not isinstance(refused.value, Forbidden)

    with fleet.client("read") as dl, pytest.raises(Forbidden) as refused:
        dl.submit_sources([str(fleet.document("a.md"))])
    error = refused.value
    assert (error.status, error.code, error.detail["needs"]) == (403, "E109", "submit")
    assert error.title and error.action and "read" in error.message
    with fleet.client("submit") as dl, pytest.raises(Forbidden):
        dl.cancel(UNKNOWN)


def test_not_found_wrong_state_and_invalid_input(fleet: Fleet) -> None:
    with fleet.client() as dl:
        with pytest.raises(NotFound) as missing:
            dl.job(UNKNOWN)
        assert (missing.value.status, missing.value.code) == (404, "E108")
        with pytest.raises(InvalidInput) as refused:
            dl.submit_sources([str(fleet.folder / "nowhere.md")])
        assert (refused.value.status, refused.value.code) == (422, "E101")
        assert refused.value.detail["rejected"][0]["code"] == "E101"
        with pytest.raises(InvalidInput) as bad:
            dl.submit_sources([str(fleet.document("b.md"))], to="pdf")
        assert (bad.value.status, bad.value.code) == (422, "invalid_request")

        queued = dl.submit_sources([str(fleet.document("c.md"))])[0]  # no worker: it stays
        with pytest.raises(NotFound) as early:
            dl.result(queued, "md")
        assert "queued" in early.value.message and not isinstance(early.value, JobFailed)
        dl.cancel(queued)
        with pytest.raises(WrongState):
            dl.cancel(queued)
        with pytest.raises(JobFailed) as cancelled:
            dl.result(queued, "md")
        assert cancelled.value.state == "cancelled" and cancelled.value.job_id == queued.id


def test_one_refused_upload_among_several_is_reported_not_raised(fleet: Fleet) -> None:
    good, empty = fleet.document("good.md"), fleet.document("empty.md", "")
    with fleet.client() as dl:
        jobs = dl.submit([good, empty])
        assert [j.source for j in jobs] == [str(good)]
        assert [(r.source, r.code) for r in jobs.rejected] == [(str(empty), "E106")]
        with pytest.raises(InvalidInput) as first:
            jobs.raise_for_rejected()
        assert first.value.code == "E106"
        with pytest.raises(InvalidInput) as alone:
            dl.submit([empty])  # every file refused: the refusal itself
        assert alone.value.code == "E106"


@pytest.mark.parametrize("fleet_env", [{"DOCLANE_MAX_SOURCE_BYTES": "64"}])
def test_a_file_too_large(fleet: Fleet) -> None:
    with fleet.client() as dl, pytest.raises(InvalidInput) as refused:
        dl.submit([fleet.document("big.md", "x" * 1000)])
    assert (refused.value.status, refused.value.code) == (413, "E103")


def test_a_failed_job_and_a_wait_that_times_out(fleet: Fleet) -> None:
    with fleet.client() as dl:
        doomed = fleet.document("doomed.md")
        jobs = dl.submit_sources([str(doomed), str(fleet.document("fine.md"))])
        with pytest.raises(WaitTimeout) as late:
            list(dl.wait(jobs, timeout=0.3))  # no worker yet
        assert sorted(late.value.pending) == sorted(j.id for j in jobs)
        assert isinstance(late.value, TimeoutError)
        doomed.unlink()  # gone before any worker reads it: E101 at the worker
        fleet.start_worker()
        ended = {str(j.id): j for j in dl.wait(jobs, timeout=120)}
        failed = ended[jobs[0].id]
        assert (failed.state, failed.error_code) == ("failed", "E101")
        with pytest.raises(JobFailed) as raised:
            dl.result(jobs[0].id)
        assert (raised.value.code, raised.value.state) == ("E101", "failed")
        with pytest.raises(WrongState) as not_retried:  # its source is still gone: refused
            dl.retry(jobs[0].id)
        assert (not_retried.value.status, not_retried.value.code) == (409, "E101")
        assert not_retried.value.detail["retry_of"] == jobs[0].id
        assert ended[jobs[1].id].state == "succeeded"


def test_an_expired_result(fleet: Fleet) -> None:
    fleet.start_worker()
    with fleet.client() as dl:
        jobs = dl.submit_sources([str(fleet.document("short-lived.md"))])
        [job] = list(dl.wait(jobs, timeout=120))
        assert "short-lived" in dl.result(job.id)
        wait_for(lambda: fleet.cluster.reconcile(DOCLANE_RESULT_RETENTION="1s"), timeout=60,
                 message="a reconciler pass that expires the result")  # fmt: skip
        with pytest.raises(ResultExpired) as gone:
            dl.result(job.id)
    assert (gone.value.status, gone.value.code) == (410, "E113")
    assert isinstance(gone.value, NotFound)


def test_what_the_api_cannot_be_made_to_answer_here(fleet: Fleet) -> None:
    bug = Recording([_error(500, "E399")])
    with fleet.client(transport=bug) as dl, pytest.raises(ServerError) as raised:
        dl.stats()
    assert raised.value.code == "E399" and len(bug.log) == 1  # a bug is not retried

    down = Recording([_error(503, "E401")] * 50)
    retries = FAST["retries"].__class__(attempts=3, total_s=10, initial_s=0.01, max_wait_s=0.02)
    with fleet.client(transport=down, retries=retries) as dl, pytest.raises(Unavailable) as out:
        dl.stats()
    assert out.value.code == "E401" and out.value.retryable and len(down.log) == 3

    not_html = Recording([httpx.Response(502, text="<html>bad gateway</html>")] * 3)
    with fleet.client(transport=not_html, retries=retries) as dl, pytest.raises(Unavailable) as gw:
        dl.stats()
    assert (gw.value.status, gw.value.code) == (
        502,
        "http_502",
    ) and "bad gateway" in gw.value.message

    full = Recording([_error(429, "E115", **{"Retry-After": "3600"})])
    with fleet.client(transport=full) as dl, pytest.raises(QuotaExceeded) as quota:
        dl.submit_sources([str(fleet.document("q.md"))])
    assert (quota.value.code, quota.value.retry_after) == ("E115", 3600.0)
    assert len(full.log) == 1  # longer than the policy waits for: raised at once, not slept on
    assert isinstance(quota.value, DoclaneError)
