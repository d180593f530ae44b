"""The console in a real headless browser (Debian's Chromium, driven by Playwright), against a
real ``doclane api``, real worker processes and the fake MCP server: sign in, upload, watch the
jobs finish, read a result, make a job fail, find it by its code, retry it, refuse what must be
refused, and never run a converted document's script.

With ``DOCLANE_CONSOLE_SCREENSHOTS=<folder>`` the test also saves the pictures of the list, a
job and the upload page there (``scripts/console_screenshots.py`` writes docs/console-*.png so).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from playwright.sync_api import Browser, Page, expect

from pipeline.jobs.model import JobState
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.console_browser import _sign_in, _upload
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.workers import Cluster

#: A document whose markdown tries every way of running script in whoever shows it.
HOSTILE = (
    "# Hostile\n\n<script>window.__pwned = 'script'; document.title = 'pwned'</script>\n\n"
    "<img src=x onerror=\"window.__pwned = 'onerror'\">\n\n"
    "[click me](javascript:window.__pwned='link')\n"
)
WAIT_MS = 60_000


def _shoot(page: Page, name: str) -> None:
    folder = os.environ.get("DOCLANE_CONSOLE_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"console-{name}.png"), full_page=True)


def _row(page: Page, name: str) -> object:
    return page.locator("#uploads tbody tr", has_text=name)


@pytest.fixture
def fleet(
    make_cluster: Callable[..., Cluster],
    make_api_server: Callable[..., ApiServer],
    redis_broker: Broker,
    fake_server: FakeServer,
) -> tuple[Cluster, ApiServer]:
    """One worker on the fake server, and a ``doclane api`` over the same database."""
    cluster = make_cluster(redis_broker, fake_server.url)
    cluster.start_worker(concurrency=1)
    return cluster, make_api_server(cluster.env)


def test_the_console_end_to_end(
    fleet: tuple[Cluster, ApiServer], fake_server: FakeServer, browser: Browser, tmp_path: Path
) -> None:
    cluster, api = fleet
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Console notes\n\nHello from **the browser**.\n")
    (docs / "hostile.md").write_text(HOSTILE)
    for name in ("doomed", "doomed-too", "slow"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nThe server is unkind to {name}.\n")

    context = browser.new_context(base_url=api.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    # ---- a wrong token is refused; the right one signs in (never in the URL)
    page.goto("/console/jobs?state=failed")
    assert page.url.startswith(api.url + "/console/login")
    _sign_in(page, "not-the-token")
    expect(page.locator("#refused")).to_be_visible()
    assert not context.cookies()
    _sign_in(page, api.token)
    expect(page).to_have_url(api.url + "/console/jobs?state=failed")
    [cookie] = context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert api.token not in page.url and api.token not in cookie["value"]

    # ---- upload two documents, watch them succeed on the same page
    _upload(page, [docs / "notes.md", docs / "hostile.md"])
    for name in ("notes.md", "hostile.md"):
        expect(_row(page, name).locator("[data-state]")).to_have_text("succeeded", timeout=WAIT_MS)
    _shoot(page, "upload")

    # ---- a job's page: its markdown rendered and as text, its downloads, its history
    _row(page, "notes.md").locator("a").click()
    expect(page.locator("#state")).to_have_text("succeeded")
    expect(page.locator("#rendered h1")).to_have_text("Console notes")
    expect(page.locator("#rendered strong")).to_have_text("the browser")
    assert "# Console notes" in page.locator("#raw").text_content()
    expect(page.locator("#downloads a", has_text="md")).to_be_visible()
    expect(page.locator("#events")).to_contain_text("queued → running")
    with page.expect_download() as download:
        page.click("#downloads a")
    assert "Console notes" in Path(download.value.path()).read_text()
    href = page.locator("#downloads a").get_attribute("href")
    saved = page.request.get(href or "")  # a result is saved, never run in the console's origin
    assert saved.headers["content-disposition"].startswith("attachment")
    assert saved.headers["content-security-policy"].startswith("sandbox")
    _shoot(page, "job")

    # ---- a document's script never runs in the console
    hostile_id = _job_id_of(api, "hostile.md")
    page.goto(f"/console/jobs/{hostile_id}")
    expect(page.locator("#rendered h1")).to_have_text("Hostile")
    page.click("#raw-section summary")
    expect(page.locator("#raw")).to_contain_text("<script>")
    for link in page.locator("#rendered a").all():
        link.click()
    assert page.evaluate("window.__pwned") is None
    assert page.title() != "pwned" and not dialogs
    assert page.locator("#rendered script, #rendered [onerror]").count() == 0

    # ---- make a job fail, find it by its code from the status page, retry it
    fake_server.configure(fail_next=-1, fail_with="is_error")
    _upload(page, [docs / "doomed.md", docs / "doomed-too.md"])
    for name in ("doomed.md", "doomed-too.md"):
        expect(_row(page, name).locator("[data-state]")).to_have_text("failed", timeout=WAIT_MS)
    doomed_id = _job_id_of(api, "doomed.md")
    [failed] = cluster.jobs([doomed_id])
    assert failed.state is JobState.FAILED and failed.error_code
    fake_server.reset()
    page.goto("/")
    page.click(f"tr[data-code={failed.error_code}] a")
    expect(page).to_have_url(f"{api.url}/console/jobs?state=failed&error_code={failed.error_code}")
    expect(page.locator("#jobs tbody tr")).to_have_count(2)
    _shoot(page, "list")
    page.click(f"#jobs a[href='/console/jobs/{doomed_id}']")
    expect(page.locator("#error")).to_contain_text(failed.error_code)
    page.click("#retry")
    page.click("#confirm")
    expect(page.locator("#done")).to_have_text("Done: resubmitted.")
    retried_id = UUID(page.url.split("/console/jobs/")[1].split("?")[0])
    assert retried_id != doomed_id
    expect(page.locator("#state")).to_have_text("succeeded", timeout=WAIT_MS)

    # ---- bulk retry of the failed jobs with that code that are left
    page.goto(f"/console/jobs?state=failed&error_code={failed.error_code}")
    page.click("#bulk-retry")
    expect(page.locator("#bulk-count")).to_contain_text("2 failed jobs")
    page.click("#confirm")
    expect(page.locator("#retried tbody tr")).to_have_count(2)
    expect(page.locator("#retried [data-state]", has_text="succeeded")).to_have_count(
        2, timeout=WAIT_MS
    )  # doomed-too's retry, and doomed's (its first retry's succeeded job: same content)

    # ---- cancel a job while the server is still converting it
    fake_server.configure(delay_s=60)
    _upload(page, [docs / "slow.md"])
    expect(_row(page, "slow.md").locator("[data-state]")).to_have_text("running", timeout=WAIT_MS)
    _row(page, "slow.md").locator("a").click()
    page.click("#cancel")
    page.click("#confirm")
    expect(page.locator("#done")).to_have_text("Done: cancelled.")
    expect(page.locator("#state")).to_have_text("cancelled")
    fake_server.reset()

    # ---- a form without its CSRF token changes nothing
    status = page.evaluate(
        "async (id) => (await fetch(`/console/jobs/${id}/retry`, {method: 'POST', "
        "body: new URLSearchParams({csrf: 'forged'})})).status",
        str(doomed_id),
    )
    assert status == 403
    status = page.evaluate(
        "async (id) => (await fetch(`/console/jobs/${id}/retry`, {method: 'POST'})).status",
        str(doomed_id),
    )
    assert status == 403
    # notes, hostile, doomed and doomed-too, one retry of each, slow: nothing more
    assert len(_jobs(api)) == 7

    # ---- signing out ends the session
    page.click(".logout button")
    expect(page).to_have_url(api.url + "/console/login")
    page.goto("/console/jobs")
    assert page.url.startswith(api.url + "/console/login")
    context.close()


def _jobs(api: ApiServer) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = api.get("/v1/jobs", params={"limit": 100}).json()["jobs"]
    return jobs


def _job_id_of(api: ApiServer, name: str) -> UUID:
    """The first job submitted for an uploaded document of this name."""
    jobs = [j for j in _jobs(api) if j["source_uri"].endswith("/" + name)]
    return UUID(min(jobs, key=lambda j: str(j["created_at"]))["id"])


def test_the_console_filters_by_submission_and_uploads_with_options(
    fleet: tuple[Cluster, ApiServer], browser: Browser, tmp_path: Path
) -> None:
    cluster, api = fleet
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("paged", "refused", "together-1", "together-2"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nA page or two of {name}.\n")
    together = api.post(
        "/v1/jobs", json={"sources": [str(docs / "together-1.md"), str(docs / "together-2.md")]}
    ).json()
    context = browser.new_context(base_url=api.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto("/console/upload")
    _sign_in(page, api.token)

    # ---- a bad page range is refused on the page, with its code, and makes no job
    _upload(page, [docs / "refused.md"], pages="1,3")
    expect(_row(page, "refused.md").locator("[data-state]")).to_have_text("refused")
    expect(_row(page, "refused.md").locator("[data-error]")).to_contain_text("E110")
    # the webhook field goes with the upload: the cloud's metadata address is refused (E104)
    _upload(page, [docs / "refused.md"], webhook="http://169.254.169.254/hook")
    expect(_row(page, "refused.md").locator("[data-error]")).to_contain_text("E104")

    # ---- a page range no configured server can honour (the fake is a docling-mcp server) is
    # refused at the upload with E305, before any job is made; without it the upload converts
    _upload(page, [docs / "paged.md"], pages="1 - 2", ocr_lang="en")
    expect(_row(page, "paged.md").locator("[data-state]")).to_have_text("refused")
    expect(_row(page, "paged.md").locator("[data-error]")).to_contain_text("E305")
    _upload(page, [docs / "paged.md"])
    row = _row(page, "paged.md")
    expect(row.locator("[data-state]")).to_have_text("succeeded", timeout=WAIT_MS)
    row.locator("a").click()
    [paged] = cluster.jobs([_job_id_of(api, "paged.md")])
    assert paged.options == {}
    assert len(_jobs(api)) == 3  # the submission's two and paged: the refused uploads made none

    # ---- a job's page links to its submission's jobs; the list filters by a typed submission
    page.click("#submission")
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    expect(page.locator(f"#jobs tr[data-job-id='{paged.id}']")).to_be_visible()
    page.fill("input[name=submission]", together["submission_id"][:8])  # as the list shows it
    page.click("#filters button[type=submit]")
    expect(page.locator("input[name=submission]")).to_have_value(together["submission_id"])
    expect(page.locator("#jobs tbody tr[data-job-id]")).to_have_count(2)
    for accepted in together["accepted"]:
        expect(page.locator(f"#jobs tr[data-job-id='{accepted['job_id']}']")).to_be_visible()
    # ---- the job-id box takes the 8 characters the list shows
    page.fill("input[name=job]", str(paged.id)[:8])
    page.press("input[name=job]", "Enter")
    expect(page).to_have_url(re.compile(rf"/console/jobs/{paged.id}$"))
    context.close()
