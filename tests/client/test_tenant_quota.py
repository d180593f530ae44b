"""A real 429: a tenant's queue full (E115, lane ``tenancy``'s quotas), retried after the
API's ``Retry-After`` and then raised as ``QuotaExceeded`` with it.

Written against the tenancy lane's contract (``doclane tenants set NAME --max-queued N``, tokens
as JSON entries carrying a ``tenant``, a submission refused whole answered 429 with
``Retry-After`` and the E115 body); it skips on an API without tenants, and runs once they are
merged.
"""

from __future__ import annotations

import json
import secrets

import pytest
from doclane_client import QuotaExceeded, RetryPolicy

from tests.client.conftest import Fleet, Recording

#: Long enough to see a retry, short enough for a test: a longer Retry-After is raised at once.
POLICY = RetryPolicy(attempts=2, total_s=60, initial_s=0.05, max_wait_s=1, max_retry_after_s=5)


def test_a_full_tenant_queue_is_retried_after_its_retry_after(fleet: Fleet) -> None:
    if fleet.cluster.cli("tenants", "--help", check=False).returncode != 0:
        pytest.skip("this API has no tenants yet (lane tenancy): no real 429 to ask for")
    token = secrets.token_urlsafe(16)
    entries = [{"name": f"{r}-client", "role": r, "token": t} for r, t in fleet.tokens.items()]
    entries.append({"name": "team-a", "role": "submit", "token": token, "tenant": "team-a"})
    fleet.api_env["DOCLANE_API_TOKENS"] = json.dumps(entries)
    fleet.restart_api()  # ensures the token's tenant exists
    fleet.cluster.cli("tenants", "set", "team-a", "--max-queued", "1")

    wire = Recording()
    with fleet.client(token, transport=wire, retries=POLICY) as dl:
        assert len(dl.submit_sources([str(fleet.document("first.md"))])) == 1  # no worker
        with pytest.raises(QuotaExceeded) as full:
            dl.submit_sources([str(fleet.document("second.md"))])
    error = full.value
    assert (error.status, error.code) == (429, "E115") and error.retry_after is not None
    refusals = [(outcome, at) for _, _, outcome, at in wire.log if outcome == 429]
    if error.retry_after <= POLICY.max_retry_after_s:
        assert len(refusals) == 2  # sent again once, after what the API asked
        assert refusals[1][1] - refusals[0][1] >= error.retry_after
    else:
        assert len(refusals) == 1  # longer than this caller waits: raised at once
