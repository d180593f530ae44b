"""The audit trail over real HTTP, the console and the CLI: who did what, when, from where, the
outcome; never a secret; append-only but for the retention's own delete."""

from __future__ import annotations

import json
import secrets
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from pipeline.jobs.settings import ReconcileSettings
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.support.cli import doclane

SUBMITTER = secrets.token_urlsafe(24)
READER = secrets.token_urlsafe(24)


@pytest.fixture
def api(make_api_server: Callable[..., ApiServer], test_database_env: dict[str, str]) -> ApiServer:
    listed = f"ci:submit:{SUBMITTER},grafana:read:{READER}"
    return make_api_server(test_database_env, DOCLANE_API_TOKENS=listed)


def _doc(tmp_path: Path) -> str:
    path = tmp_path / f"doc-{uuid.uuid4().hex[:8]}.md"
    path.write_text(f"# {path.name}\n")
    return str(path)


def _trail(api: ApiServer, **query: str) -> list[dict[str, Any]]:
    answer = api.get("/v1/audit", params=query)
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["entries"]
    return entries


def test_every_change_over_http_is_recorded_with_who_where_what_and_outcome(
    api: ApiServer, tmp_path: Path
) -> None:
    sent = api.post("/v1/jobs", token=SUBMITTER, json={"sources": [_doc(tmp_path), _doc(tmp_path)]})
    assert sent.status_code == 202, sent.text
    job_id = sent.json()["accepted"][0]["job_id"]
    assert api.post(f"/v1/jobs/{job_id}/cancel", token=READER).status_code == 403
    assert api.post(f"/v1/jobs/{job_id}/cancel").status_code == 200
    assert api.post(f"/v1/jobs/{uuid.uuid4()}/retry").status_code == 404
    assert api.post("/v1/jobs/" + job_id + "/retry").status_code == 200
    assert api.get("/v1/jobs", token=READER).status_code == 200  # a read: not recorded

    entries = _trail(api)
    shown = [(e["actor"], e["action"], e["outcome"]) for e in reversed(entries)]
    assert shown == [
        ("ci", "submit", "ok"),
        ("grafana", "cancel", "E109"),
        ("DOCLANE_API_TOKEN", "cancel", "ok"),
        ("DOCLANE_API_TOKEN", "retry", "E108"),
        ("DOCLANE_API_TOKEN", "retry", "ok"),
    ]
    submit = entries[-1]
    assert submit["detail"]["jobs"] == 2 and submit["detail"]["refused"] == 0
    assert submit["detail"]["tenant"] == "default"
    assert submit["detail"]["submission_id"] == sent.json()["submission_id"]
    assert all(e["address"] == "127.0.0.1" and e["at"] for e in entries)
    assert entries[2]["target"] == job_id
    # Filters, and admins only.
    assert [e["action"] for e in _trail(api, actor="ci")] == ["submit"]
    assert len(_trail(api, action="cancel")) == 2
    assert api.get("/v1/audit", token=READER).status_code == 403
    # Never a secret.
    text = api.get("/v1/audit").text
    assert not any(s in text for s in (SUBMITTER, READER, api.token))


def test_the_consoles_actions_are_recorded_as_the_apis(api: ApiServer, tmp_path: Path) -> None:
    sent = api.post("/v1/jobs", json={"sources": [_doc(tmp_path)]})
    job_id = sent.json()["accepted"][0]["job_id"]
    with httpx.Client(base_url=api.url, follow_redirects=False) as browser:
        signed = browser.post("/console/login", data={"token": api.token, "next": "/console/jobs"})
        assert signed.status_code == 303
        page = browser.get(f"/console/jobs/{job_id}/cancel").text
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        done = browser.post(f"/console/jobs/{job_id}/cancel", data={"csrf": csrf})
        assert done.status_code == 303, done.text
    cancel = _trail(api, action="cancel")[0]
    assert cancel["actor"] == "DOCLANE_API_TOKEN" and cancel["outcome"] == "ok"
    assert cancel["target"] == job_id and cancel["detail"] == {"via": "console"}
    assert not [e for e in _trail(api) if e["action"] in ("login", "logout")]


def test_the_clis_changes_are_recorded_and_doclane_audit_reads_them(
    api: ApiServer, test_database_env: dict[str, str], tmp_path: Path
) -> None:
    sent = api.post("/v1/jobs", json={"sources": [_doc(tmp_path)]})
    job_id = sent.json()["accepted"][0]["job_id"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return doclane(*args, env=test_database_env, cwd=tmp_path)

    assert cli("cancel", job_id).returncode == 0
    assert cli("cancel", job_id).returncode == 1  # already cancelled: refused, recorded
    assert cli("tenants", "set", "team-q", "--max-queued", "5").returncode == 0
    made = cli("tokens", "create", "bot", "--role", "read", "--json")
    secret = json.loads(made.stdout)["token"]
    assert cli("tokens", "revoke", "bot").returncode == 0
    listed = cli("audit", "--json")
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)["entries"]
    shown = [(e["action"], e["target"], e["outcome"]) for e in reversed(entries)]
    assert shown == [
        ("submit", None, "ok"),
        ("cancel", job_id, "ok"),
        ("cancel", job_id, "wrong_state"),
        ("set_tenant", "team-q", "ok"),
        ("create_token", "bot", "ok"),
        ("revoke_token", "bot", "ok"),
    ]
    assert all(e["actor"].startswith("cli:") for e in entries[:-1])
    assert entries[2]["detail"]["max_queued"] == "5"
    assert secret not in listed.stdout
    only = json.loads(cli("audit", "--action", "cancel", "--json").stdout)["entries"]
    assert len(only) == 2
    text = cli("audit", "--since", "1h")
    assert text.returncode == 0 and "revoke_token bot -> ok" in text.stdout


def test_the_trail_is_append_only_and_the_reconciler_applies_its_retention(
    store: JobStore, raw_sql: psycopg.Connection
) -> None:
    from pipeline.store.access import AuditEntry

    for n in range(3):
        store.audit.record(AuditEntry(actor=f"a{n}", action="cancel", outcome="ok"))
    with pytest.raises(psycopg.errors.CheckViolation):
        raw_sql.execute("DELETE FROM audit_log")
    with pytest.raises(psycopg.errors.CheckViolation):
        raw_sql.execute("UPDATE audit_log SET actor = 'someone else'")
    # Two entries made old (the trigger is set aside as an operator's restore would), then a
    # pass with a retention of a day deletes exactly them.
    raw_sql.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only")
    raw_sql.execute("UPDATE audit_log SET at = now() - interval '2 days' WHERE actor <> 'a2'")
    raw_sql.execute("ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only")
    cfg = ReconcileSettings(audit_retention_days=1)
    assert store.audit.prune(cfg.audit_retention_days * 86400.0) == 2
    left = raw_sql.execute("SELECT actor FROM audit_log").fetchall()
    assert left == [("a2",)]


@pytest.mark.parametrize("field", ["actor", "action"])
def test_a_nul_in_a_filter_is_refused_not_a_server_error(api: ApiServer, field: str) -> None:
    """PostgreSQL's text holds no NUL byte: asked with one, the store raised and the API answered
    500 (found by the schema fuzzer); the API refuses it as invalid, the console says so."""
    answer = api.get("/v1/audit", params={field: "can\x00cel"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] != "E399"
    assert _trail(api, **{field: "cancel"}) == []  # the same filter without it still answers
    with httpx.Client(base_url=api.url, follow_redirects=False) as browser:
        signed = browser.post("/console/login", data={"token": api.token, "next": "/console/jobs"})
        assert signed.status_code == 303
        page = browser.get("/console/audit", params={field: "can\x00cel"})
    assert page.status_code == 200, page.text
    assert "cannot contain a NUL byte" in page.text


def test_doclane_submit_is_recorded_as_a_submission_over_http_is(
    test_database_env: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    from pipeline.access.audit import cli_actor
    from pipeline.store.access import AuditFilter

    good, gone = _doc(tmp_path), str(tmp_path / "gone.md")
    made = doclane("submit", good, gone, "--json", env=test_database_env, cwd=tmp_path)
    assert made.returncode == 1, made.stderr  # one source refused
    submission_id = json.loads(made.stdout)["submission_id"]
    refused = doclane("submit", gone, env=test_database_env, cwd=tmp_path)
    unknown = doclane("submit", good, "--tenant", "nobody", env=test_database_env, cwd=tmp_path)
    assert refused.returncode == unknown.returncode == 1

    entries = list(reversed(store.audit.list(AuditFilter(action="submit"))))
    assert [(e.actor, e.target, e.outcome) for e in entries] == [
        (cli_actor(), None, "ok"),
        (cli_actor(), None, "E101"),  # every source refused: the first refusal's code
        (cli_actor(), None, "E116"),  # refused whole
    ]
    assert entries[0].detail == {
        "tenant": "default",
        "submission_id": submission_id,
        "jobs": 1,
        "refused": 1,
    }
    assert entries[1].detail["jobs"] == 0 and entries[1].detail["refused"] == 1
    assert entries[2].detail == {"tenant": "nobody"}
    assert all(e.address for e in entries)  # the host it ran on
