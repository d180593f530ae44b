"""The client against a real API's rate limit (E122, told from the quota's E115) and its
Idempotency-Key: a submission whose answer was lost on the way back is sent again with the same
key and answered the first submission's jobs, not submitted twice."""

from __future__ import annotations

import httpx
import pytest
from doclane_client import QuotaExceeded, RateLimited, RetryPolicy

from tests.support.client_fleet import Fleet, Recording

POLICY = RetryPolicy(attempts=5, total_s=60, initial_s=0.05, max_wait_s=1, max_retry_after_s=15)


@pytest.fixture
def fleet_env(redis_broker: object) -> dict[str, str]:
    # The admin token (the fleet's DOCLANE_API_TOKEN) is not limited: the test's own reads.
    return {
        "DOCLANE_API_RATE_LIMITS": "submit=1/10seconds,read=1/minute",
        "DOCLANE_REDIS_URL": redis_broker.url,  # type: ignore[attr-defined]
    }


def test_the_client_waits_out_a_rate_limits_retry_after(fleet: Fleet) -> None:
    wire = Recording()
    with fleet.client("submit", transport=wire, retries=POLICY) as dl:
        for n in range(2):  # the second within ten seconds: refused, waited for, sent again
            dl.submit_sources([str(fleet.document(f"r{n}.md"))])
    posts = [(outcome, at) for method, _, outcome, at in wire.log if method == "POST"]
    assert [outcome for outcome, _ in posts] == [202, 429, 202]
    assert posts[2][1] - posts[1][1] >= 1.0  # it waited the Retry-After, at least a second


def test_a_rate_limit_past_the_cap_is_raised_as_rate_limited(fleet: Fleet) -> None:
    with fleet.client("read", retries=POLICY) as dl:
        dl.stats()
        with pytest.raises(RateLimited) as limited:
            dl.stats()
    error = limited.value
    assert isinstance(error, QuotaExceeded)  # waited for as a quota is, where it can be
    assert (error.status, error.code, error.retryable) == (429, "E122", True)
    assert error.retry_after is not None and error.retry_after > POLICY.max_retry_after_s


class LosingFirstAnswer(Recording):
    """The first submission reaches the API, and its answer is lost on the way back (a read
    timeout, to the client); the keys of every submission are kept."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []
        self.replayed: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.keys.append(request.headers.get("Idempotency-Key", ""))
        response = super().handle_request(request)
        if request.method == "POST":
            response.read()
            self.replayed.append(response.headers.get("Idempotent-Replayed"))
            if len(self.keys) == 1:
                raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


def test_a_submission_whose_answer_was_lost_is_not_submitted_twice(fleet: Fleet) -> None:
    wire = LosingFirstAnswer()
    with fleet.client("submit", transport=wire, retries=POLICY) as dl:
        accepted = dl.submit_sources([str(fleet.document("once.md"))])
    assert len(accepted) == 1
    # Sent again with the same key (and once more after the rate limit's 429, in this fleet:
    # the key is kept across every retry of the request), answered by the first submission.
    assert len(wire.keys) >= 2 and wire.keys[0] and set(wire.keys) == {wire.keys[0]}
    assert wire.replayed[0] is None and wire.replayed[-1] == "true"
    with fleet.client() as admin:
        assert len(list(admin.jobs())) == 1
