"""Tokens with roles over real HTTP: each role against each class of endpoint.

read may GET (jobs, a job, results, stats); submit may also POST /v1/jobs; admin may also cancel
and retry. The single DOCLANE_API_TOKEN of earlier releases is an admin token. A known token
whose role falls short is 403 with E109; no token or an unknown one is 401. No token's secret is
ever shown: not in an answer, not in the log.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker

ROLES = ("read", "submit", "admin")
#: What each endpoint class needs, as the least role that may call it.
NEEDS = {"read": "read", "submit": "submit", "admin": "admin"}


@pytest.fixture
def tokens() -> dict[str, str]:
    return {role: secrets.token_urlsafe(24) for role in ROLES}


@pytest.fixture
def api(
    make_api_server: Callable[..., ApiServer],
    migrated_database_url: str,
    redis_broker: Broker,
    tmp_path: Path,
    tokens: dict[str, str],
) -> ApiServer:
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
    }
    listed = ",".join(f"{role}-client:{role}:{token}" for role, token in tokens.items())
    return make_api_server(env, DOCLANE_API_TOKENS=listed)


def _document(tmp_path: Path, n: int) -> str:
    path = tmp_path / f"doc-{n}.md"
    path.write_text(f"# Document {n}\n")
    return str(path)


def test_each_role_against_each_endpoint_class(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path
) -> None:
    sent = api.post("/v1/jobs", json={"sources": [_document(tmp_path, 0)]})  # the legacy token
    assert sent.status_code == 202, sent.text
    job_id = sent.json()["accepted"][0]["job_id"]
    counter = iter(range(1, 100))

    def calls() -> dict[str, list[tuple[str, str, dict[str, object]]]]:
        return {
            "read": [
                ("GET", "/v1/jobs", {}),
                ("GET", f"/v1/jobs/{job_id}", {}),
                ("GET", f"/v1/jobs/{job_id}/result/md", {}),
                ("GET", "/v1/stats", {}),
            ],
            "submit": [
                ("POST", "/v1/jobs", {"json": {"sources": [_document(tmp_path, next(counter))]}}),
                ("POST", "/v1/jobs", {"files": {"file": (f"up-{next(counter)}.md", b"# up\n")}}),
            ],
            "admin": [
                ("POST", f"/v1/jobs/{job_id}/retry", {}),
                ("POST", f"/v1/jobs/{job_id}/cancel", {}),
            ],
        }

    for role in ROLES:
        for endpoint_class, requests in calls().items():
            allowed = ROLES.index(role) >= ROLES.index(NEEDS[endpoint_class])
            for method, path, kwargs in requests:
                answer = api.request(method, path, token=tokens[role], **kwargs)
                where = (role, method, path)
                if allowed:
                    assert answer.status_code not in (401, 403), (where, answer.text)
                    continue
                assert answer.status_code == 403, (where, answer.text)
                error = answer.json()["error"]
                assert error["code"] == "E109", where
                assert error["detail"] == {
                    "token": f"{role}-client", "role": role, "needs": NEEDS[endpoint_class],
                }  # fmt: skip
                assert tokens[role] not in answer.text
    # The admin token's cancel went through (the last of the admin class): the job is cancelled.
    assert api.get(f"/v1/jobs/{job_id}").json()["job"]["state"] == "cancelled"


def test_unknown_tokens_are_401_and_no_secret_is_shown(
    api: ApiServer, tokens: dict[str, str]
) -> None:
    for wrong in ("", "not-a-token", tokens["read"][:-1], tokens["read"] + "x", api.token[1:]):
        answer = api.get("/v1/stats", token=wrong or None)
        assert answer.status_code == 401, wrong
        assert answer.json()["error"]["code"] == "unauthorized"
    everything = [
        api.get("/openapi.json", token=None).text,
        api.get("/", token=None).text,
        api.get("/metrics", token=None).text,
        api.get("/v1/stats", token=tokens["admin"]).text,
        api.log(),
    ]
    for secret in (*tokens.values(), api.token):
        assert not any(secret in text for text in everything)


def test_a_malformed_token_list_stops_the_api_without_showing_it(
    make_api_server: Callable[..., ApiServer], tmp_path: Path
) -> None:
    secret = secrets.token_urlsafe(24)
    for listed in (
        f"ci:superuser:{secret}",  # no such role
        f"ci:read:{secret},ops:admin:{secret}",  # one secret, two roles
        json.dumps([{"name": "ci", "role": "read"}]),  # no token
    ):
        with pytest.raises(AssertionError, match="exited") as failed:
            make_api_server(dict(os.environ), DOCLANE_API_TOKENS=listed)
        assert "DOCLANE_API_TOKENS" in str(failed.value) or "api_tokens" in str(failed.value)
        assert secret not in str(failed.value)
