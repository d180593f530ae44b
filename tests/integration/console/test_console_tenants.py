"""The console of a tenant's token over real HTTP: its own jobs only (another tenant's job is
"no such job" on every page and action, and absent from the live refresh), its uploads its
tenant's, cancel of its own jobs with the submit role; an admin sees a tenant column and
filters by tenant. (The console's pages are the same in a browser: tests/e2e/test_console.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from uuid import UUID

import httpx

from pipeline.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.fixtures.console_tenants import A_TOKEN, B_TOKEN, _submit


def _signed_in(api: ApiServer, token: str) -> httpx.Client:
    client = httpx.Client(base_url=api.url, timeout=30)
    answer = client.post("/console/login", data={"token": token, "next": "/console/jobs"})
    assert answer.status_code == 303
    return client


def _rows(page: httpx.Response) -> list[str]:
    return re.findall(r'<tr data-job-id="([0-9a-f-]{36})"', page.text)


def test_a_tenants_console_shows_its_jobs_only(
    api: ApiServer, tmp_path: Path, store: JobStore
) -> None:
    ours = _submit(api, A_TOKEN, tmp_path / "ours.md")
    theirs = _submit(api, B_TOKEN, tmp_path / "theirs.md")
    alice = _signed_in(api, A_TOKEN)
    listed = alice.get("/console/jobs")
    assert _rows(listed) == [ours] and "alice (submit, tenant team-a)" in listed.text
    assert "<th>tenant</th>" not in listed.text and 'name="tenant"' not in listed.text
    assert _rows(alice.get("/console/jobs", params={"tenant": "team-b"})) == [ours]
    csrf = re.search(r'name="csrf" value="([^"]+)"', listed.text)
    assert csrf
    nobody = "6f1d2c1e-0000-4000-8000-000000000000"
    for job_id in (theirs, nobody):  # another tenant's job: as one that does not exist
        for path in (f"/console/jobs/{job_id}", f"/console/jobs/{job_id}/results/md"):
            page = alice.get(path)
            assert page.status_code == 404 and "No such job" in page.text, path
        for action in ("cancel", "retry"):
            assert alice.get(f"/console/jobs/{job_id}/{action}").status_code == 404
            posted = alice.post(f"/console/jobs/{job_id}/{action}", data={"csrf": csrf.group(1)})
            assert posted.status_code == 404 and "No such job" in posted.text, action
    confirm_theirs = alice.get(f"/console/jobs/{theirs}/cancel")
    assert confirm_theirs.status_code == 404 and "theirs.md" not in confirm_theirs.text
    live = alice.get("/console/live", params={"ids": f"{ours},{theirs}"}).json()
    assert list(live["jobs"]) == [ours] and live["counts"]["queued"] == 1
    assert api.get(f"/v1/jobs/{theirs}").json()["job"]["state"] == "queued"  # left alone

    # its own job: the page, and cancel with the submit role
    page = alice.get(f"/console/jobs/{ours}")
    assert page.status_code == 200 and 'id="cancel"' in page.text
    assert '<td id="tenant">team-a</td>' in page.text
    done = alice.post(f"/console/jobs/{ours}/cancel", data={"csrf": csrf.group(1)})
    assert done.status_code == 303
    assert api.get(f"/v1/jobs/{ours}").json()["job"]["state"] == "cancelled"

    # its uploads are its tenant's
    upload_page = alice.get("/console/upload").text
    token = re.search(r'data-csrf="([^"]+)"', upload_page)
    assert token
    sent = alice.post(
        "/console/upload",
        files={"file": ("up.md", b"# up\n", "text/markdown")},
        headers={"X-CSRF-Token": token.group(1)},
    )
    assert sent.status_code == 202 and sent.json()["tenant"] == "team-a"
    [accepted] = sent.json()["accepted"]
    job = store.reads.get_job(UUID(accepted["job_id"]))
    assert job is not None and job.tenant == "team-a"


def test_an_admin_sees_each_jobs_tenant_and_filters_by_it(api: ApiServer, tmp_path: Path) -> None:
    ours = _submit(api, A_TOKEN, tmp_path / "ours.md")
    theirs = _submit(api, B_TOKEN, tmp_path / "theirs.md")
    admin = _signed_in(api, api.token)
    listed = admin.get("/console/jobs")
    assert set(_rows(listed)) == {ours, theirs} and "<th>tenant</th>" in listed.text
    assert '<option value="team-b">team-b</option>' in listed.text
    assert _rows(admin.get("/console/jobs", params={"tenant": "team-b"})) == [theirs]
    bad = admin.get("/console/jobs", params={"tenant": "Team B!"})
    assert 'id="problem"' in bad.text and not _rows(bad)
    assert admin.get(f"/console/jobs/{theirs}").status_code == 200
