"""Tenants over real HTTP: a tenant's token submits as its tenant and sees only its jobs (any
other is 404 exactly as a job that does not exist), an admin token sees all and filters, the
stats a tenant sees are its own, and a submission refused whole for the quota is 429 with a
Retry-After derived from the tenant's finishing rate."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeline.api.quota import RETRY_AFTER_IDLE_S
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.support.store_builders import job_with_id

TOKENS = {
    "ops": ("admin", None),
    "a-submit": ("submit", "team-a"),
    "a-read": ("read", "team-a"),
    "b-submit": ("submit", "team-b"),
    "a-admin": ("admin", "team-a"),
}


@pytest.fixture
def tokens() -> dict[str, str]:
    return {name: secrets.token_urlsafe(24) for name in TOKENS}


@pytest.fixture
def api(
    make_api_server: Callable[..., ApiServer],
    test_database_env: dict[str, str],
    tokens: dict[str, str],
) -> ApiServer:
    listed = [
        {"name": name, "role": role, "token": tokens[name], **({"tenant": t} if t else {})}
        for name, (role, t) in TOKENS.items()
    ]
    return make_api_server(test_database_env, DOCLANE_API_TOKENS=json.dumps(listed))


def _doc(tmp_path: Path) -> str:
    path = tmp_path / f"doc-{uuid.uuid4().hex[:8]}.md"
    path.write_text(f"# {path.name}\n")
    return str(path)


def _submit(api: ApiServer, token: str, tmp_path: Path, **body: Any) -> str:
    answer = api.post("/v1/jobs", token=token, json={"sources": [_doc(tmp_path)], **body})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["accepted"][0]["job_id"])


#: Two jobs (and submissions) of two tenants whose ids start alike.
OURS, THEIRS = "5e1d2c1e-1111-4000-8000-000000000001", "5e1d2c1f-2222-4000-8000-000000000002"
OUR_SUBMISSION = "5e1d2c1e-0000-4000-8000-0000000000a1"
THEIR_SUBMISSION = "5e1d2c1f-0000-4000-8000-0000000000a2"
SHARED = "5e1d2c1"


def test_the_api_makes_its_tokens_tenants_at_start(api: ApiServer, store: JobStore) -> None:
    assert {f.tenant.name for f in store.tenants.figures()} == {"default", "team-a", "team-b"}


def test_a_tenants_token_sees_another_tenants_job_as_one_that_does_not_exist(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    theirs = _submit(api, tokens["b-submit"], tmp_path)
    ours = _submit(api, tokens["a-submit"], tmp_path)
    assert store.reads.get_job(uuid.UUID(theirs)).tenant == "team-b"  # type: ignore[union-attr]
    nobody = str(uuid.uuid4())
    for token in (tokens["a-submit"], tokens["a-read"]):
        for method, path in (
            ("GET", "/v1/jobs/{id}"),
            ("GET", "/v1/jobs/{id}/result/md"),
            ("POST", "/v1/jobs/{id}/cancel"),
            ("POST", "/v1/jobs/{id}/retry"),
        ):
            other = api.request(method, path.format(id=theirs), token=token)
            missing = api.request(method, path.format(id=nobody), token=token)
            where = (method, path, token == tokens["a-read"])
            if token == tokens["a-read"] and method == "POST":  # its role: 403 for any job
                assert other.status_code == missing.status_code == 403, where
                continue
            assert other.status_code == missing.status_code == 404, (where, other.text)
            assert other.json()["error"]["code"] == missing.json()["error"]["code"] == "E108"
            assert other.text.replace(theirs, nobody) == missing.text, where
    # its own job is there, and it may cancel it with the submit role
    assert api.get(f"/v1/jobs/{ours}", token=tokens["a-read"]).status_code == 200
    cancelled = api.post(f"/v1/jobs/{ours}/cancel", token=tokens["a-submit"])
    assert cancelled.status_code == 200 and cancelled.json()["job"]["state"] == "cancelled"
    retried = api.post(f"/v1/jobs/{ours}/retry", token=tokens["a-submit"])
    assert retried.status_code == 200, retried.text
    new = retried.json()["job_id"]
    assert store.reads.get_job(uuid.UUID(new)).tenant == "team-a"  # type: ignore[union-attr]
    # the other tenant's job was left alone
    assert api.get(f"/v1/jobs/{theirs}", token=tokens["ops"]).json()["job"]["state"] == "queued"


def _succeeded(store: JobStore, job_id: str, markdown: str) -> None:
    claimed = store.attempts.claim(uuid.UUID(job_id), "worker-a", lease_s=60)
    assert claimed is not None
    assert store.attempts.finish(claimed.id, claimed.attempt, {"md": markdown})


def test_another_tenants_results_short_ids_and_submissions_do_not_exist_for_a_tenant(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    answer = api.post("/v1/jobs", token=tokens["b-submit"], json={"sources": [_doc(tmp_path)]})
    theirs, submission = answer.json()["accepted"][0]["job_id"], answer.json()["submission_id"]
    _succeeded(store, theirs, "# team-b's secret")
    nobody = str(uuid.uuid4())
    ours = _submit(api, tokens["a-submit"], tmp_path)
    _succeeded(store, ours, "# ours")
    reader = tokens["a-read"]

    other = api.get(f"/v1/jobs/{theirs}/result/md", token=reader)
    missing = api.get(f"/v1/jobs/{nobody}/result/md", token=reader)
    assert other.status_code == missing.status_code == 404 and "secret" not in other.text
    assert other.text.replace(theirs, nobody) == missing.text
    assert api.get(f"/v1/jobs/{ours}/result/md", token=reader).text == "# ours"
    assert api.get(f"/v1/jobs/{theirs}/result/md", token=tokens["ops"]).text == "# team-b's secret"

    # a prefix is resolved among its own jobs and submissions only: another's is E108
    for path in (f"/v1/jobs/{theirs[:8]}", f"/v1/jobs?submission={submission[:8]}"):
        refused = api.get(path, token=reader)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "E108", path
        assert api.get(path, token=tokens["ops"]).status_code == 200, path
    whole = api.get(f"/v1/jobs?submission={submission}", token=reader)
    assert whole.status_code == 200 and whole.json()["jobs"] == []


def test_a_short_id_is_resolved_among_the_tenants_own_jobs(
    api: ApiServer, tokens: dict[str, str], raw_sql: psycopg.Connection
) -> None:
    """A prefix its own job shares with another tenant's names its own: the other's is not even
    counted (an admin's E121 would tell the tenant that such a job exists)."""
    ours = job_with_id(raw_sql, OURS, tenant="team-a", submission_id=OUR_SUBMISSION)
    job_with_id(raw_sql, THEIRS, tenant="team-b", submission_id=THEIR_SUBMISSION)
    for path in (f"/v1/jobs/{SHARED}", f"/v1/jobs?submission={SHARED}"):
        answer = api.get(path, token=tokens["a-read"])
        assert answer.status_code == 200, (path, answer.text)
        assert str(ours) in answer.text and THEIRS not in answer.text
        both = api.get(path, token=tokens["ops"])
        assert both.status_code == 422 and both.json()["error"]["code"] == "E121", path


def test_a_tenants_admin_cannot_make_tokens_nor_read_the_audit_trail(
    api: ApiServer, tokens: dict[str, str]
) -> None:
    """Both span the tenants: a token of every tenant made by a tenant's admin, or the others'
    actions read, would be a way through the wall. An operator (admin of every tenant) may."""
    ours = tokens["a-admin"]
    for method, path, body in (
        ("POST", "/v1/tokens", {"name": "every", "role": "admin"}),
        ("POST", "/v1/tokens", {"name": "ours", "role": "read", "tenant": "team-a"}),
        ("GET", "/v1/tokens", None),
        ("DELETE", "/v1/tokens/bot", None),
        ("GET", "/v1/audit", None),
    ):
        refused = api.request(method, path, token=ours, json=body)
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json()["error"]["code"] == "E109"
    assert api.get("/v1/tokens", token=tokens["ops"]).json()["tokens"] == []
    assert api.get("/v1/audit", token=tokens["ops"]).status_code == 200


def test_lists_are_the_tenants_own_and_an_admin_filters(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path
) -> None:
    a = {_submit(api, tokens["a-submit"], tmp_path) for _ in range(2)}
    b = {_submit(api, tokens["b-submit"], tmp_path)}
    d = {_submit(api, tokens["ops"], tmp_path)}

    def listed(token: str, query: str = "") -> set[str]:
        answer = api.get(f"/v1/jobs{query}", token=token)
        assert answer.status_code == 200, answer.text
        return {j["id"] for j in answer.json()["jobs"]}

    assert listed(tokens["a-read"]) == a
    assert listed(tokens["a-read"], "?tenant=team-b") == set()
    assert listed(tokens["a-read"], "?tenant=team-a&state=queued") == a
    assert listed(tokens["b-submit"]) == b
    assert listed(tokens["ops"]) == a | b | d
    assert listed(tokens["ops"], "?tenant=team-b") == b
    assert listed(tokens["ops"], "?tenant=default") == d
    assert api.get("/v1/jobs?tenant=Not_A_Name", token=tokens["ops"]).status_code == 422


def test_a_tenants_token_cannot_submit_as_another_and_an_admin_names_any_that_exists(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    refused = api.post(
        "/v1/jobs", token=tokens["a-submit"], json={"sources": [_doc(tmp_path)], "tenant": "team-b"}
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "E109"
    assert "team-a" in refused.json()["error"]["message"]
    upload = api.post(
        "/v1/jobs",
        token=tokens["a-submit"],
        files={"file": ("up.md", b"# up\n")},
        data={"tenant": "team-b"},
    )
    assert upload.status_code == 403 and upload.json()["error"]["code"] == "E109"
    named_self = _submit(api, tokens["a-submit"], tmp_path, tenant="team-a")
    uploaded = api.post("/v1/jobs", token=tokens["a-submit"], files={"file": ("u.md", b"# u\n")})
    assert uploaded.status_code == 202 and uploaded.json()["tenant"] == "team-a"
    as_b = _submit(api, tokens["ops"], tmp_path, tenant="team-b")
    jobs = store.reads.get_jobs([uuid.UUID(named_self), uuid.UUID(as_b)])
    assert [j.tenant for j in jobs] == ["team-a", "team-b"]
    unknown = api.post(
        "/v1/jobs", token=tokens["ops"], json={"sources": [_doc(tmp_path)], "tenant": "nobody"}
    )
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "E116"


def test_stats_of_a_tenants_token_are_its_own(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path
) -> None:
    _submit(api, tokens["a-submit"], tmp_path)
    _submit(api, tokens["b-submit"], tmp_path)
    _submit(api, tokens["b-submit"], tmp_path)
    own = api.get("/v1/stats", token=tokens["a-read"]).json()
    assert [t["tenant"]["name"] for t in own["tenants"]] == ["team-a"]
    assert own["tenants"][0]["queued"] == 1
    assert own["jobs"] is None and own["queues"] is None and own["workers"] is None
    every = api.get("/v1/stats", token=tokens["ops"]).json()
    queued = {t["tenant"]["name"]: t["queued"] for t in every["tenants"]}
    assert queued == {"default": 0, "team-a": 1, "team-b": 2}
    # the backlog per queue and tenant is PostgreSQL's, whatever bells the broker holds
    backlog = {q["queue"]: (q["queued"], q["tenants"]) for q in every["queues"]}
    assert backlog == {
        "doclane.small": (3, {"team-a": 1, "team-b": 2}),
        "doclane.medium": (0, {}),
        "doclane.large": (0, {}),
    }


def test_a_submission_refused_whole_for_the_quota_is_429_with_retry_after(
    api: ApiServer, tokens: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    store.tenants.set("team-a", max_queued=3)
    sources = [_doc(tmp_path) for _ in range(5)]
    partly = api.post("/v1/jobs", token=tokens["a-submit"], json={"sources": sources})
    assert partly.status_code == 202, partly.text
    body = partly.json()
    assert len(body["accepted"]) == 3
    assert [r["code"] for r in body["rejected"]] == ["E115", "E115"]

    whole = api.post("/v1/jobs", token=tokens["a-submit"], json={"sources": sources[:2]})
    assert whole.status_code == 429, whole.text
    error = whole.json()["error"]
    assert error["code"] == "E115" and error["retryable"] is True
    assert int(whole.headers["Retry-After"]) == RETRY_AFTER_IDLE_S  # nothing finished yet
    assert error["detail"]["retry_after"] == RETRY_AFTER_IDLE_S
    assert [r["code"] for r in error["detail"]["rejected"]] == ["E115", "E115"]

    # 30 of its jobs finished in the window: 0.1 a second, so room for 2 in 20 s
    store.tenants.set("team-a", max_queued=None)
    for _ in range(30):
        job_id = _submit(api, tokens["a-submit"], tmp_path)
        claimed = store.attempts.claim(uuid.UUID(job_id), "worker-a", lease_s=60)
        assert claimed is not None
        assert store.attempts.finish(claimed.id, claimed.attempt, {"md": "# done"})
    store.tenants.set("team-a", max_queued=3)
    timed = api.post("/v1/jobs", token=tokens["a-submit"], json={"sources": sources[:2]})
    assert timed.status_code == 429 and timed.headers["Retry-After"] == "20"
    # another tenant is not held up by team-a's quota
    assert (
        api.post("/v1/jobs", token=tokens["b-submit"], json={"sources": sources[:2]}).status_code
        == 202
    )
