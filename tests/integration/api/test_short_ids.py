"""Short ids at every door, as the console shows them (8 characters): the API's paths and its
``submission`` filter, the CLI's commands and ``jobs --submission``, the console's job-id box
and its submission filter. A unique prefix names its job; more than one is E121 saying how
many; none is E108."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from collections.abc import Callable

import httpx
import psycopg
import pytest

from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.support.store_builders import job_with_id

A = "6f1d2c1e-1111-4000-8000-000000000001"
B = "6f1d2c1f-2222-4000-8000-000000000002"  # "6f1d2c1" is A's and B's
C = "6f1d2c10-3333-4000-8000-000000000003"  # team-b's
S1 = "1234abcd-0000-4000-8000-0000000000a1"
S2 = "1234abce-0000-4000-8000-0000000000a2"  # "1234abc" is S1's and S2's

TEAM_B = secrets.token_urlsafe(24)


@pytest.fixture
def api(
    make_api_server: Callable[..., ApiServer],
    test_database_env: dict[str, str],
    store: JobStore,
    raw_sql: psycopg.Connection,
) -> ApiServer:
    store.tenants.set("team-b")
    job_with_id(raw_sql, A, submission_id=S1)
    job_with_id(raw_sql, B, submission_id=S2)
    job_with_id(raw_sql, C, tenant="team-b")
    team_b = {"name": "b", "role": "submit", "token": TEAM_B, "tenant": "team-b"}
    return make_api_server(test_database_env, DOCLANE_API_TOKENS=json.dumps([team_b]))


def test_the_apis_paths_and_filter_take_a_unique_prefix(api: ApiServer) -> None:
    assert api.get(f"/v1/jobs/{A[:8]}").json()["job"]["id"] == A
    assert api.post(f"/v1/jobs/{A[:8]}/cancel").json()["job"]["state"] == "cancelled"
    no_result = api.get(f"/v1/jobs/{A[:8]}/result/md")
    assert no_result.status_code == 404 and "cancelled" in no_result.json()["error"]["message"]
    many = api.get("/v1/jobs/6f1d2c1")
    assert many.status_code == 422 and many.json()["error"]["code"] == "E121"
    assert "3 jobs have an id that starts with '6f1d2c1'" in many.json()["error"]["message"]
    none = api.get("/v1/jobs/abcdef12")
    assert none.status_code == 404 and none.json()["error"]["code"] == "E108"
    short = api.get("/v1/jobs/6f1d")
    assert short.status_code == 422 and short.json()["error"]["code"] == "invalid_request"

    listed = api.get("/v1/jobs", params={"submission": S1[:8]}).json()["jobs"]
    assert [j["id"] for j in listed] == [A]
    mixed = api.get("/v1/jobs", params={"submission": "1234abc"})
    assert mixed.status_code == 422 and mixed.json()["error"]["code"] == "E121"

    # a tenant's token: the others' ids are neither found nor counted
    assert api.get("/v1/jobs/6f1d2c1", token=TEAM_B).json()["job"]["id"] == C
    assert api.get(f"/v1/jobs/{A[:8]}", token=TEAM_B).json()["error"]["code"] == "E108"


def _doclane(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_cli_takes_a_unique_prefix(api: ApiServer, test_database_env: dict[str, str]) -> None:
    env = test_database_env
    shown = _doclane(env, "status", A[:8], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["job"]["id"] == A
    cancelled = _doclane(env, "cancel", B[:8])
    assert cancelled.returncode == 0 and cancelled.stdout.startswith(B), cancelled.stderr
    many = _doclane(env, "status", "6f1d2c1")
    assert many.returncode == 1 and many.stderr.startswith("E121 ambiguous short id: 3 jobs")
    as_json = json.loads(_doclane(env, "result", "6f1d2c1", "--json").stdout)
    assert as_json["ok"] is False and as_json["error"]["code"] == "E121"
    none = _doclane(env, "status", "abcdef12")
    assert none.returncode == 1 and none.stderr.startswith("E108 ")
    short = _doclane(env, "status", "6f1d")
    assert short.returncode == 2 and "at least its first 6 characters" in short.stderr

    listed = _doclane(env, "jobs", "--submission", S1[:8], "--json")
    assert [j["id"] for j in json.loads(listed.stdout)["jobs"]] == [A]
    old = _doclane(env, "jobs", "--batch", S2, "--json")  # the old name still works, unlisted
    assert [j["id"] for j in json.loads(old.stdout)["jobs"]] == [B]
    assert "--batch" not in _doclane(env, "jobs", "--help").stdout
    mixed = _doclane(env, "jobs", "--submission", "1234abc")
    assert mixed.returncode == 1 and mixed.stderr.startswith("E121 ")


def _signed_in(api: ApiServer) -> httpx.Client:
    client = httpx.Client(base_url=api.url, timeout=30)
    answer = client.post("/console/login", data={"token": api.token, "next": "/console/jobs"})
    assert answer.status_code == 303
    return client


def test_the_consoles_box_and_filter_take_a_unique_prefix(api: ApiServer) -> None:
    client = _signed_in(api)
    went = client.get("/console/jobs", params={"job": A[:8]})
    assert went.status_code == 303 and went.headers["location"] == f"/console/jobs/{A}"
    many = client.get("/console/jobs", params={"job": "6f1d2c1"})
    assert many.status_code == 422 and "E121: 3 jobs have an id" in many.text
    assert client.get("/console/jobs", params={"job": "abcdef12"}).status_code == 404
    assert client.get("/console/jobs", params={"job": "6f1d"}).status_code == 422
    typed = client.get(f"/console/jobs/{A[:8]}")  # the start of an id in the address
    assert typed.status_code == 303 and typed.headers["location"] == f"/console/jobs/{A}"

    listed = client.get("/console/jobs", params={"submission": S1[:8]}).text
    assert f'name="submission" value="{S1}"' in listed  # the whole id, in the form and links
    assert re.findall(r'<tr data-job-id="([^"]+)"', listed) == [A]
    mixed = client.get("/console/jobs", params={"submission": "1234abc"}).text
    assert 'id="problem"' in mixed and "E121: 2 submissions" in mixed
