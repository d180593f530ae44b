"""Tokens kept in PostgreSQL, over real HTTP and the real CLI, on two API processes at once.

``doclane tokens create`` prints the secret once and stores only its SHA-256 digest; the token
works on every API process at once; ``doclane tokens revoke`` (or ``DELETE /v1/tokens/NAME``)
makes every process refuse it at its next request, with no restart; an expired token is
refused the same way; a console session of a revoked token is signed out. The environment's
tokens keep working beside them.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest

from tests.fixtures.api_server import ApiServer


def doclane(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _created(env: dict[str, str], *args: str) -> dict[str, Any]:
    made = doclane(env, "tokens", "create", *args, "--json")
    assert made.returncode == 0, made.stderr + made.stdout
    out: dict[str, Any] = json.loads(made.stdout)
    return out


@pytest.fixture
def apis(
    make_api_server: Callable[..., ApiServer], test_database_env: dict[str, str]
) -> tuple[ApiServer, ApiServer]:
    return make_api_server(test_database_env), make_api_server(test_database_env)


def test_a_stored_token_works_everywhere_and_its_revocation_is_seen_at_once(
    apis: tuple[ApiServer, ApiServer],
    test_database_env: dict[str, str],
    raw_sql: psycopg.Connection,
) -> None:
    one, two = apis
    made = _created(test_database_env, "ci-bot", "--role", "submit", "--tenant", "team-x")
    secret = made["token"]
    assert secret.startswith("dl_") and made["role"] == "submit" and made["tenant"] == "team-x"
    for api in (one, two):
        assert api.get("/v1/stats", token=secret).status_code == 200
    # Only the digest is kept: no column of any row holds the secret.
    row = raw_sql.execute("SELECT * FROM api_tokens WHERE name = 'ci-bot'").fetchone()
    assert row is not None
    assert bytes(raw_sql.execute("SELECT digest FROM api_tokens").fetchone()[0]) == (  # type: ignore[index]
        hashlib.sha256(secret.encode()).digest()
    )
    assert not any(secret in str(value) for value in row)
    listed = doclane(test_database_env, "tokens", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    tokens = json.loads(listed.stdout)["tokens"]
    assert [(t["name"], t["role"], t["tenant"]) for t in tokens] == [("ci-bot", "submit", "team-x")]
    assert tokens[0]["last_used_at"] is not None
    assert secret not in listed.stdout
    # Its tenant's wall holds, as an environment token's: it sees its own tenant only.
    assert one.get("/v1/jobs?tenant=default", token=secret).json()["jobs"] == []

    revoked = doclane(test_database_env, "tokens", "revoke", "ci-bot", "--json")
    assert revoked.returncode == 0, revoked.stderr
    for api in (one, two):  # neither restarted
        refused = api.get("/v1/stats", token=secret)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthorized"
        assert api.get("/v1/stats").status_code == 200  # the environment's token still works
    again = doclane(test_database_env, "tokens", "revoke", "ci-bot", "--json")
    assert again.returncode == 1  # revoked once
    remade = doclane(test_database_env, "tokens", "create", "ci-bot", "--role", "read", "--json")
    assert remade.returncode == 2 and "not reused" in remade.stdout + remade.stderr


def test_an_expired_token_is_refused(
    apis: tuple[ApiServer, ApiServer],
    test_database_env: dict[str, str],
    raw_sql: psycopg.Connection,
) -> None:
    one, _ = apis
    secret = _created(test_database_env, "short", "--role", "read", "--expires", "1h")["token"]
    assert one.get("/v1/stats", token=secret).status_code == 200
    raw_sql.execute("UPDATE api_tokens SET expires_at = now() - interval '1 second'")
    assert one.get("/v1/stats", token=secret).status_code == 401
    listed = json.loads(doclane(test_database_env, "tokens", "list", "--json").stdout)
    assert listed["tokens"] == []  # gone from the live list, kept with --all
    every = json.loads(doclane(test_database_env, "tokens", "list", "--all", "--json").stdout)
    assert [t["name"] for t in every["tokens"]] == ["short"]


def test_admins_manage_tokens_over_http_and_no_one_else_may(
    apis: tuple[ApiServer, ApiServer], test_database_env: dict[str, str]
) -> None:
    one, two = apis
    reader = _created(test_database_env, "reader", "--role", "read")["token"]
    refused = one.post("/v1/tokens", token=reader, json={"name": "x", "role": "admin"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "E109"
    made = one.post("/v1/tokens", json={"name": "grafana", "role": "read", "expires": "90d"})
    assert made.status_code == 201, made.text
    secret = made.json()["token"]
    assert made.json()["stored"]["expires_at"] is not None
    assert two.get("/v1/stats", token=secret).status_code == 200
    taken = one.post("/v1/tokens", json={"name": "grafana", "role": "read"})
    assert taken.status_code == 409
    names = [t["name"] for t in one.get("/v1/tokens").json()["tokens"]]
    assert names == ["grafana", "reader"]
    assert secret not in one.get("/v1/tokens").text
    assert two.request("DELETE", "/v1/tokens/grafana").status_code == 200
    assert one.get("/v1/stats", token=secret).status_code == 401
    assert one.request("DELETE", "/v1/tokens/grafana").status_code == 404


def test_a_console_session_of_a_revoked_token_is_signed_out(
    apis: tuple[ApiServer, ApiServer], test_database_env: dict[str, str]
) -> None:
    one, two = apis
    secret = _created(test_database_env, "person", "--role", "admin")["token"]
    with httpx.Client(base_url=one.url, follow_redirects=False) as browser:
        signed = browser.post("/console/login", data={"token": secret, "next": "/console/jobs"})
        assert signed.status_code == 303, signed.text
        assert browser.get("/console/jobs").status_code == 200
        assert two.request("DELETE", "/v1/tokens/person").status_code == 200
        gone = browser.get("/console/jobs")
        assert gone.status_code == 303 and "/console/login" in gone.headers["location"]


def test_the_cli_refuses_a_name_of_the_environments_tokens(
    test_database_env: dict[str, str],
) -> None:
    env = {**test_database_env, "DOCLANE_API_TOKENS": "ops:admin:" + "s" * 24}
    made = doclane(env, "tokens", "create", "ops", "--role", "read", "--json")
    assert made.returncode == 2, made.stdout
    assert "environment" in made.stdout
