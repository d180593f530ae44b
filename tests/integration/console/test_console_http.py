"""The console over real HTTP, without a browser: what a page does without a session, signing
in, the job list's keyset pages, the CSRF check of the upload, and the headers every page sends.
(tests/e2e/test_console.py drives the same console in Chromium, with workers.)"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker

PAGES = ["/console/jobs", "/console/jobs/6f1d2c1e-0000-4000-8000-000000000000", "/console/upload"]


#: A second token, with the read role only.
VIEWER = "viewer-token-0123456789"


@pytest.fixture
def api_env(migrated_database_url: str, redis_broker: Broker, tmp_path: Path) -> dict[str, str]:
    return {
        "DOCLANE_API_TOKENS": f"viewer:read:{VIEWER}",
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
        "DOCLANE_INSPECT_TIMEOUT_S": "0.3",
    }


@pytest.fixture
def api(make_api_server: Callable[..., ApiServer], api_env: dict[str, str]) -> ApiServer:
    return make_api_server(api_env)


def _signed_in(api: ApiServer, token: str | None = None) -> httpx.Client:
    client = httpx.Client(base_url=api.url, timeout=30)
    form = {"token": token or api.token, "next": "/console/jobs?state=failed"}
    answer = client.post("/console/login", data=form)
    assert answer.status_code == 303 and answer.headers["location"] == form["next"]
    return client


def _csrf(client: httpx.Client) -> str:
    match = re.search(r'data-csrf="([^"]+)"', client.get("/console/upload").text)
    assert match
    return match.group(1)


def test_without_a_session_pages_lead_to_the_sign_in_and_fetches_get_401(api: ApiServer) -> None:
    for path in PAGES:
        answer = httpx.get(api.url + path + "?state=failed", timeout=30)
        assert answer.status_code == 303, path
        assert unquote(answer.headers["location"]) == f"/console/login?next={path}?state=failed"
    live = httpx.get(api.url + "/console/live", headers={"Accept": "application/json"})
    assert live.status_code == 401 and live.json()["error"]["code"] == "unauthorized"
    forged = httpx.get(api.url + "/console/jobs", cookies={"doclane_console": "x.y.z"})
    assert forged.status_code == 303
    wrong = httpx.post(api.url + "/console/login", data={"token": api.token + "x"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    outside = httpx.post(api.url + "/console/login", data={"token": api.token, "next": "//x.test"})
    assert outside.headers["location"] == "/console/jobs"
    entry = httpx.get(api.url + "/console", follow_redirects=True, timeout=30)
    assert entry.status_code == 200 and entry.url.path == "/console/login"
    # the status page stays open, and links into the console
    assert 'href="/console/jobs"' in httpx.get(api.url + "/", timeout=30).text


def test_the_list_pages_by_keyset_newest_first(api: ApiServer, tmp_path: Path) -> None:
    docs = []
    for n in range(120):
        doc = tmp_path / f"doc-{n:03}.md"
        doc.write_text(f"# Document {n}\n")
        docs.append(str(doc))
    for start in (0, 60):  # two submissions: rows of one may share a created_at (the cursor's id)
        sent = api.post("/v1/jobs", json={"sources": docs[start : start + 60]})
        assert len(sent.json()["accepted"]) == 60
    client = _signed_in(api)
    seen: list[str] = []
    path: str | None = "/console/jobs?queue=doclane.small"
    while path:
        page = client.get(path)
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        seen += re.findall(r'<tr data-job-id="([0-9a-f-]{36})"', page.text)
        found = re.search(r'<a href="([^"]+)" id="next-page"', page.text)
        path = found.group(1).replace("&amp;", "&") if found else None
    assert len(seen) == len(set(seen)) == 120
    listed = api.get("/v1/jobs", params={"limit": 1000}).json()["jobs"]
    assert seen == [j["id"] for j in listed]  # the same order as the API's newest first

    jump = client.get("/console/jobs", params={"job": seen[5]})
    assert jump.status_code == 303 and jump.headers["location"] == f"/console/jobs/{seen[5]}"
    not_an_id = client.get("/console/jobs/not-a-uuid")
    assert not_an_id.status_code == 422 and 'id="problem"' in not_an_id.text
    unknown = client.get("/console/jobs/6f1d2c1e-0000-4000-8000-000000000000")
    assert unknown.status_code == 404 and "No such job" in unknown.text
    bad = client.get("/console/jobs", params={"since": "whenever"})
    assert (
        bad.status_code == 200 and 'id="problem"' in bad.text and "<tr data-job-id" not in bad.text
    )


def test_an_upload_needs_its_sessions_csrf_token(api: ApiServer) -> None:
    client = _signed_in(api)
    files = {"file": ("notes.md", b"# Notes\n", "text/markdown")}
    json_please = {"Accept": "application/json"}
    refused = client.post("/console/upload", files=files, headers=json_please)
    assert refused.status_code == 403
    forged = client.post("/console/upload", files=files, headers={"X-CSRF-Token": "forged"})
    assert forged.status_code == 403
    sent = client.post(
        "/console/upload",
        files=files,
        data={"to": "md,json"},
        headers={"X-CSRF-Token": _csrf(client)},
    )
    assert sent.status_code == 202, sent.text
    [accepted] = sent.json()["accepted"]
    job = api.get(f"/v1/jobs/{accepted['job_id']}").json()["job"]
    assert job["formats"] == ["json", "md"] and job["state"] == "queued"
    live = client.get("/console/live", params={"ids": accepted["job_id"]}).json()
    assert live["jobs"][accepted["job_id"]]["state"] == "queued"
    assert live["counts"]["queued"] == 1
    empty = client.post(
        "/console/upload",
        files={"file": ("empty.md", b"", "text/markdown")},
        headers={"X-CSRF-Token": _csrf(client)},
    )
    assert [r["code"] for r in empty.json()["rejected"]] == ["E106"]


def test_a_read_token_reads_and_changes_nothing(api: ApiServer, tmp_path: Path) -> None:
    doc = tmp_path / "report.md"
    doc.write_text("# Report\n")
    [accepted] = api.post("/v1/jobs", json={"sources": [str(doc)]}).json()["accepted"]
    job_id = accepted["job_id"]
    viewer = _signed_in(api, VIEWER)
    listed = viewer.get("/console/jobs")
    assert job_id in listed.text and "viewer (read)" in listed.text
    assert 'href="/console/upload"' not in listed.text
    page = viewer.get(f"/console/jobs/{job_id}")
    assert page.status_code == 200 and 'id="cancel"' not in page.text
    assert viewer.get(f"/console/jobs/{job_id}/cancel").status_code == 403
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    refused = viewer.post(f"/console/jobs/{job_id}/cancel", data={"csrf": csrf.group(1)})
    assert refused.status_code == 403 and "role read" in refused.text
    assert viewer.get("/console/upload").status_code == 403
    files = {"file": ("notes.md", b"# Notes\n", "text/markdown")}
    sent = viewer.post(
        "/console/upload",
        files=files,
        headers={"X-CSRF-Token": csrf.group(1), "Accept": "application/json"},
    )
    assert sent.status_code == 403 and sent.json()["error"]["code"] == "E109"
    assert api.get(f"/v1/jobs/{job_id}").json()["job"]["state"] == "queued"
    admin = _signed_in(api)
    assert 'id="cancel"' in admin.get(f"/console/jobs/{job_id}").text


def _listed(client: httpx.Client, path: str) -> list[str]:
    """The job ids of a list, followed page by page along its next links."""
    seen: list[str] = []
    next_path: str | None = path
    while next_path:
        page = client.get(next_path)
        assert page.status_code == 200 and 'id="problem"' not in page.text, page.text
        seen += re.findall(r'<tr data-job-id="([0-9a-f-]{36})"', page.text)
        found = re.search(r'<a href="([^"]+)" id="next-page"', page.text)
        next_path = found.group(1).replace("&amp;", "&") if found else None
    return seen


def test_a_refused_retry_says_so_with_its_code_and_what_to_do(
    api: ApiServer, tmp_path: Path
) -> None:
    doc = tmp_path / "gone.md"
    doc.write_text("# Soon gone\n")
    job_id = api.post("/v1/jobs", json={"sources": [str(doc)]}).json()["accepted"][0]["job_id"]
    api.post(f"/v1/jobs/{job_id}/cancel")
    doc.unlink()
    client = _signed_in(api)
    refused = client.post(f"/console/jobs/{job_id}/retry", data={"csrf": _csrf(client)})
    assert refused.status_code == 409, refused.text
    assert "Retry refused" in refused.text and "E101: " in refused.text
    assert 'id="problem-action">Check the path or URL' in refused.text
    assert [j["id"] for j in api.get("/v1/jobs").json()["jobs"]] == [job_id]


def test_the_list_filters_by_submission_page_by_page(api: ApiServer, tmp_path: Path) -> None:
    submissions: dict[str, list[str]] = {}
    for name, count in (("big", 60), ("other", 3), ("small", 4)):
        docs = []
        for n in range(count):
            doc = tmp_path / f"{name}-{n:03}.md"
            doc.write_text(f"# {name} {n}\n")
            docs.append(str(doc))
        answer = api.post("/v1/jobs", json={"sources": docs}).json()
        submissions[name] = [answer["submission_id"], *(a["job_id"] for a in answer["accepted"])]
    client = _signed_in(api)
    for name, (submission, *job_ids) in submissions.items():
        seen = _listed(client, f"/console/jobs?submission={submission}")
        assert sorted(seen) == sorted(job_ids), name
        listed = api.get("/v1/jobs", params={"submission": submission, "limit": 1000}).json()
        assert seen == [j["id"] for j in listed["jobs"]]  # newest first, as the API lists them
    big, *big_jobs = submissions["big"]
    first = client.get("/console/jobs", params={"submission": big.upper()})
    assert f'name="submission" value="{big}"' in first.text  # the field keeps the filter
    assert f"submission={big}" in first.text.split('id="next-page"')[0].rsplit("<a", 1)[1]
    narrowed = client.get("/console/jobs", params={"submission": big, "queue": "doclane.large"})
    assert "<tr data-job-id" not in narrowed.text  # filters combine (the documents are small)

    assert 'id="bulk-retry"' in client.get("/console/jobs", params={"state": "failed"}).text
    one_submission = {"state": "failed", "submission": big}  # bulk retry cannot take a submission
    assert 'id="bulk-retry"' not in client.get("/console/jobs", params=one_submission).text

    job_page = client.get(f"/console/jobs/{big_jobs[0]}")
    assert f'href="/console/jobs?submission={big}"' in job_page.text

    bad = client.get("/console/jobs", params={"submission": "not-an-id"})
    assert bad.status_code == 200 and 'id="problem"' in bad.text
    assert "<tr data-job-id" not in bad.text


def test_an_upload_carries_its_conversion_options(
    api: ApiServer, make_api_server: Callable[..., ApiServer], api_env: dict[str, str]
) -> None:
    client = _signed_in(api)
    form = client.get("/console/upload").text
    assert '<fieldset id="options">' in form and 'name="pages"' in form
    assert 'value="text"' in form and 'value="chunks"' in form
    files = {"file": ("report.md", b"# Report\n", "text/markdown")}
    options = {"pages": " 2 - 5 ", "ocr_lang": "en,de", "text_layer_only": "true"}
    sent = client.post(
        "/console/upload",
        files=files,
        data={"to": "text,chunks", **options, "password_env": "REPORT_PASSWORD"},
        headers={"X-CSRF-Token": _csrf(client)},
    )
    assert sent.status_code == 202, sent.text
    [accepted] = sent.json()["accepted"]
    job = api.get(f"/v1/jobs/{accepted['job_id']}").json()["job"]
    assert job["formats"] == ["chunks", "text"]
    assert job["options"] == {
        "pages": "2-5",
        "ocr_lang": "en,de",
        "text_layer_only": True,
        "password_env": "REPORT_PASSWORD",
    }
    shown = client.get(f"/console/jobs/{accepted['job_id']}").text
    assert 'data-option="pages">pages <b>2-5</b>' in shown
    assert 'data-option="password_env">password_env <b>REPORT_PASSWORD</b>' in shown
    assert 'data-option="text_layer_only">text_layer_only <b>yes</b>' in shown

    for field, value in (
        ("pages", "1,3"),
        ("pages", "5-2"),
        ("ocr_lang", "en de"),
        ("text_layer_only", "maybe"),
    ):
        refused = client.post(
            "/console/upload",
            files={"file": ("other.md", b"# Other\n", "text/markdown")},
            data={field: value},
            headers={"X-CSRF-Token": _csrf(client), "Accept": "application/json"},
        )
        assert refused.status_code == 422, (field, refused.text)
        assert refused.json()["error"]["code"] == "E110", field
    assert len(api.get("/v1/jobs").json()["jobs"]) == 1  # nothing refused became a job

    # A deployment that forces a profile without options does not offer them.
    forced = make_api_server(api_env, DOCLANE_PROFILE="per-format")
    page = _signed_in(forced).get("/console/upload").text
    assert '<fieldset id="options" disabled>' in page and 'id="options-refused"' in page


def test_an_address_that_failed_too_many_sign_ins_is_refused_even_the_right_token(
    make_api_server: Callable[..., ApiServer], api_env: dict[str, str]
) -> None:
    """Failed sign-ins are counted per client address (here as a proxy on the same host names
    it, X-Forwarded-For, which uvicorn trusts): past the limit the catalog's E114, 429."""
    api = make_api_server(
        api_env, DOCLANE_CONSOLE_SIGNIN_FAILURES="3", DOCLANE_CONSOLE_SIGNIN_WINDOW_S="3600"
    )
    guesser, someone = {"X-Forwarded-For": "203.0.113.7"}, {"X-Forwarded-For": "198.51.100.9"}
    login = api.url + "/console/login"
    for n in range(3):
        wrong = httpx.post(login, data={"token": f"guess-{n}"}, headers=guesser, timeout=30)
        assert wrong.status_code == 401 and 'id="refused"' in wrong.text, n

    refused = httpx.post(login, data={"token": api.token}, headers=guesser, timeout=30)

    assert refused.status_code == 429 and "set-cookie" not in refused.headers
    assert 0 < int(refused.headers["retry-after"]) <= 3600
    assert 'id="throttled"' in refused.text and "E114" in refused.text
    assert "try again in" in refused.text
    # another address still signs in, and the right token was never looked at for the guesser
    signed = {"token": api.token, "next": "/console/jobs"}
    other = httpx.post(login, data=signed, headers=someone, timeout=30)
    assert other.status_code == 303 and "set-cookie" in other.headers
