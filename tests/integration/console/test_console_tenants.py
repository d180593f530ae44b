"""The console of a tenant's token over real HTTP: its own jobs only (another tenant's job is
"no such job" on every page and action, by its whole id or a short one, its results and its
submission too, and absent from the live refresh and the counts), its uploads its tenant's,
cancel of its own jobs with the submit role, a bulk retry of its own failed jobs with the admin
role; an admin sees a tenant column and filters by tenant. (The console's pages are the same in
a browser: tests/e2e/test_console.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from uuid import UUID

import httpx
import psycopg

from errors import SourceNotFound
from pipeline.store.admin import JobFilter
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.fixtures.console_tenants import A_ADMIN, A_TOKEN, B_TOKEN, _submit
from tests.support.store_builders import job_with_id


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
    assert _rows(alice.get("/console/jobs", params={"tenant": "team-b"})) == []  # none of its
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


def _csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found
    return found.group(1)


def test_another_tenants_results_short_ids_and_submission_are_no_such_job(
    api: ApiServer, tmp_path: Path, store: JobStore
) -> None:
    theirs = _submit(api, B_TOKEN, tmp_path / "theirs.md")
    claimed = store.attempts.claim(UUID(theirs), "worker-a", lease_s=60)
    assert claimed is not None
    assert store.attempts.finish(claimed.id, claimed.attempt, {"md": "# team-b's secret"})
    job = store.reads.get_job(UUID(theirs))
    assert job is not None and job.submission_id is not None
    alice = _signed_in(api, A_TOKEN)
    download = alice.get(f"/console/jobs/{theirs}/results/md")
    assert download.status_code == 404 and "secret" not in download.text
    box = alice.get("/console/jobs", params={"job": theirs[:8]})
    assert box.status_code == 404 and "No such job" in box.text
    listed = alice.get("/console/jobs", params={"submission": str(job.submission_id)[:8]})
    assert 'id="problem"' in listed.text and "E108" in listed.text and not _rows(listed)
    admin = _signed_in(api, api.token)
    assert admin.get(f"/console/jobs/{theirs}/results/md").text == "# team-b's secret"
    assert admin.get("/console/jobs", params={"job": theirs[:8]}).status_code == 303


def test_a_short_id_is_resolved_among_the_tenants_own_jobs(
    api: ApiServer, raw_sql: psycopg.Connection
) -> None:
    ours = "5e1d2c1e-1111-4000-8000-000000000001"
    job_with_id(
        raw_sql, ours, tenant="team-a", submission_id="5e1d2c1e-0000-4000-8000-0000000000a1"
    )
    theirs = "5e1d2c1f-2222-4000-8000-000000000002"
    job_with_id(
        raw_sql, theirs, tenant="team-b", submission_id="5e1d2c1f-0000-4000-8000-0000000000a2"
    )
    alice = _signed_in(api, A_TOKEN)
    box = alice.get("/console/jobs", params={"job": "5e1d2c1"}, follow_redirects=False)
    assert box.status_code == 303 and box.headers["location"] == f"/console/jobs/{ours}"
    assert _rows(alice.get("/console/jobs", params={"submission": "5e1d2c1"})) == [ours]
    admin = _signed_in(api, api.token)
    assert admin.get("/console/jobs", params={"job": "5e1d2c1"}).status_code == 422  # E121


def test_a_tenants_admin_retries_its_own_failed_jobs_in_bulk_only_and_makes_no_token(
    api: ApiServer, tmp_path: Path, store: JobStore
) -> None:
    failed = {}
    for token, name in ((A_TOKEN, "ours.md"), (B_TOKEN, "theirs.md")):
        job_id = UUID(_submit(api, token, tmp_path / name))
        assert store.attempts.claim(job_id, "worker-a", lease_s=60) is not None
        assert store.attempts.fail(job_id, 1, SourceNotFound("gone"))
        failed[name] = job_id
    carol = _signed_in(api, A_ADMIN)
    confirm = carol.get("/console/retry-failed", params={"error_code": "E101"})
    assert confirm.status_code == 200 and "<b>1</b> failed job\n" in confirm.text, confirm.text
    done = carol.post("/console/retry-failed", data={"csrf": _csrf(confirm), "error_code": "E101"})
    assert done.status_code == 200, done.text
    assert "Retried 1 job<" in done.text and str(failed["ours.md"])[:8] in done.text
    team_b = store.admin.list_jobs(JobFilter(tenant="team-b"))
    assert [j.id for j in team_b] == [failed["theirs.md"]]  # left alone, not resubmitted
    assert len(store.admin.list_jobs(JobFilter(tenant="team-a"))) == 2
    # tokens and the trail span the tenants: an operator's pages, not a tenant's admin's
    assert "/console/tokens" not in done.text
    for path in ("/console/tokens", "/console/audit"):
        assert carol.get(path).status_code == 403, path
    made = carol.post(
        "/console/tokens", data={"csrf": _csrf(confirm), "name": "x", "role": "admin"}
    )
    assert made.status_code == 403 and not store.tokens.list_all()


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
