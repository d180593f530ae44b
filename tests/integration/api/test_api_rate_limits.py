"""Rate limits per caller, shared by two API processes through one real Redis; and
Idempotency-Key on POST /v1/jobs, over real HTTP and PostgreSQL."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker

BULK = secrets.token_urlsafe(24)
OTHER = secrets.token_urlsafe(24)


@pytest.fixture
def pair(
    make_api_server: Callable[..., ApiServer],
    test_database_env: dict[str, str],
    redis_broker: Broker,
) -> tuple[ApiServer, ApiServer]:
    """Two API processes on one Redis: 3 requests a minute each caller, 5 for ``ops``."""
    env = {
        **test_database_env,
        "DOCLANE_REDIS_URL": redis_broker.url,
        "DOCLANE_API_RATE_LIMIT": "3/minute",
        "DOCLANE_API_RATE_LIMITS": "ops=5/minute",
        "DOCLANE_API_TOKENS": f"bulk:submit:{BULK},other:read:{OTHER}",
    }
    return make_api_server(env), make_api_server(env)


def test_a_caller_past_its_rate_is_429_with_retry_after_on_every_process(
    pair: tuple[ApiServer, ApiServer],
) -> None:
    one, two = pair
    assert one.get("/v1/stats", token=BULK).status_code == 200
    assert two.get("/v1/stats", token=BULK).status_code == 200
    assert one.get("/v1/jobs", token=BULK).status_code == 200
    for api in (two, one):  # the fourth, on either process: the count is shared
        refused = api.get("/v1/stats", token=BULK)
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "E122" and error["retryable"] is True
        wait = int(refused.headers["Retry-After"])
        assert 1 <= wait <= 60 and error["detail"]["retry_after"] == wait
        assert error["detail"]["rate"] == "3/minute"
    # Another caller has its own count; a caller's own rate wins over the default.
    assert one.get("/v1/stats", token=OTHER).status_code == 200


def test_a_rate_of_its_own_and_no_limit_without_one(
    make_api_server: Callable[..., ApiServer],
    test_database_env: dict[str, str],
    redis_broker: Broker,
) -> None:
    env = {
        **test_database_env,
        "DOCLANE_REDIS_URL": redis_broker.url,
        "DOCLANE_API_RATE_LIMITS": "bulk=2/minute",
        "DOCLANE_API_TOKENS": f"bulk:submit:{BULK},other:read:{OTHER}",
    }
    api = make_api_server(env)
    assert [api.get("/v1/stats", token=BULK).status_code for _ in range(3)] == [200, 200, 429]
    # No default rate: a caller without a rate of its own is never counted.
    assert {api.get("/v1/stats", token=OTHER).status_code for _ in range(6)} == {200}


def _doc(tmp_path: Path) -> str:
    path = tmp_path / f"doc-{uuid.uuid4().hex[:8]}.md"
    path.write_text(f"# {path.name}\n")
    return str(path)


def test_the_same_idempotency_key_answers_the_first_submission_again(
    api_on_test_database: ApiServer, tmp_path: Path, store: JobStore
) -> None:
    api = api_on_test_database
    body = {"sources": [_doc(tmp_path), _doc(tmp_path)]}
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = api.post("/v1/jobs", json=body, headers=key)
    assert first.status_code == 202, first.text
    again = api.post("/v1/jobs", json=body, headers=key)
    assert again.status_code == 202
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    jobs = api.get("/v1/jobs", params={"submission": first.json()["submission_id"]}).json()
    assert len(jobs["jobs"]) == 2
    assert len(api.get("/v1/jobs").json()["jobs"]) == 2  # nothing submitted twice

    other = api.post("/v1/jobs", json={"sources": [_doc(tmp_path)]}, headers=key)
    assert other.status_code == 422, other.text
    assert other.json()["error"]["code"] == "E123"
    assert len(api.get("/v1/jobs").json()["jobs"]) == 2
    # Without a key, the same body is a submission of its own (deduplication aside).
    fresh = api.post("/v1/jobs", json={"sources": [_doc(tmp_path)]})
    assert fresh.status_code == 202 and "Idempotent-Replayed" not in fresh.headers
    # The audit trail says which answer was a replay.
    trail = [e for e in api.get("/v1/audit").json()["entries"] if e["action"] == "submit"]
    assert [e["detail"].get("replayed", False) for e in reversed(trail)] == [
        False, True, False, False,
    ]  # fmt: skip
    assert [e["outcome"] for e in reversed(trail)] == ["ok", "ok", "E123", "ok"]


def test_a_refused_first_submission_gives_its_key_back(
    api_on_test_database: ApiServer, tmp_path: Path
) -> None:
    api = api_on_test_database
    key = {"Idempotency-Key": "retry-me"}
    body = {"sources": [str(tmp_path / "missing.md")]}
    refused = api.post("/v1/jobs", json=body, headers=key)
    assert refused.status_code == 422, refused.text
    (tmp_path / "missing.md").write_text("# here now\n")
    accepted = api.post("/v1/jobs", json=body, headers=key)
    assert accepted.status_code == 202, accepted.text
    assert "Idempotent-Replayed" not in accepted.headers


def test_keys_are_per_caller(
    make_api_server: Callable[..., ApiServer], test_database_env: dict[str, str], tmp_path: Path
) -> None:
    api = make_api_server(test_database_env, DOCLANE_API_TOKENS=f"bulk:submit:{BULK}")
    key = {"Idempotency-Key": "shared-key"}
    mine = api.post("/v1/jobs", json={"sources": [_doc(tmp_path)]}, headers=key)
    theirs = api.post("/v1/jobs", token=BULK, json={"sources": [_doc(tmp_path)]}, headers=key)
    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["submission_id"] != theirs.json()["submission_id"]
