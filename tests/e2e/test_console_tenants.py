"""The console of a tenant's token in a real headless browser (Chromium, Playwright) against a
real ``doclane api``: its list holds its own jobs only, another tenant's job is "No such job",
its uploads are its tenant's and it cancels its own jobs; an admin sees each job's tenant and
filters by it. (Without workers: the jobs stay queued, which is all isolation needs.)"""

from __future__ import annotations

import re
from pathlib import Path
from uuid import UUID

from playwright.sync_api import Browser, Page, expect

from pipeline.store.admin import JobFilter
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.fixtures.console_browser import _sign_in, _upload
from tests.fixtures.console_tenants import (  # api: the same fixture
    A_TOKEN,
    B_TOKEN,
    _submit,
    api,  # noqa: F401
)


def _signed_in(chromium: Browser, server: ApiServer, token: str) -> Page:
    page = chromium.new_context(base_url=server.url).new_page()
    page.goto("/console/jobs")
    _sign_in(page, token)
    expect(page).to_have_url(server.url + "/console/jobs")
    return page


def test_a_tenant_sees_its_own_jobs_in_the_browser_and_an_admin_filters_by_tenant(
    api: ApiServer,  # noqa: F811
    browser: Browser,
    tmp_path: Path,
    store: JobStore,
) -> None:
    ours = _submit(api, A_TOKEN, tmp_path / "ours.md")
    theirs = _submit(api, B_TOKEN, tmp_path / "theirs.md")

    alice = _signed_in(browser, api, A_TOKEN)
    expect(alice.locator("#jobs tbody tr[data-job-id]")).to_have_count(1)
    expect(alice.locator(f"#jobs tr[data-job-id='{ours}']")).to_be_visible()
    expect(alice.locator("#jobs th", has_text="tenant")).to_have_count(0)
    expect(alice.locator(".who")).to_contain_text("tenant team-a")
    answer = alice.goto(f"/console/jobs/{theirs}")
    assert answer is not None and answer.status == 404
    expect(alice.locator("h1")).to_contain_text("No such job")
    answer = alice.goto(f"/console/jobs/{theirs}/cancel")
    assert answer is not None and answer.status == 404

    alice.goto(f"/console/jobs/{ours}")
    alice.click("#cancel")
    alice.click("#confirm")
    expect(alice.locator("#state")).to_have_text("cancelled")

    (tmp_path / "up.md").write_text("# up\n")
    _upload(alice, [tmp_path / "up.md"])
    row = alice.locator("#uploads tbody tr", has_text="up.md")
    expect(row.locator("[data-state]")).to_have_text("queued")
    uploaded = store.admin.list_jobs(JobFilter(tenant="team-a"))
    assert {j.tenant for j in uploaded} == {"team-a"} and len(uploaded) == 2
    assert store.reads.get_job(UUID(theirs)).state.value == "queued"  # type: ignore[union-attr]

    admin = _signed_in(browser, api, api.token)
    expect(admin.locator("#jobs th", has_text="tenant")).to_have_count(1)
    expect(admin.locator("#jobs tbody tr[data-job-id]")).to_have_count(3)
    admin.select_option("select[name=tenant]", "team-b")
    admin.click("#filters button[type=submit]")
    expect(admin).to_have_url(re.compile(r"/console/jobs\?.*\btenant=team-b\b"))
    expect(admin.locator("#jobs tbody tr[data-job-id]")).to_have_count(1)
    expect(admin.locator(f"#jobs tr[data-job-id='{theirs}'] td.tenant")).to_have_text("team-b")
