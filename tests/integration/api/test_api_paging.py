"""``GET /v1/jobs`` a page at a time over real HTTP: ``limit`` jobs, newest first, and the
answer's ``next_before`` sent back as ``before`` for the next page, until it is null. The
cursor is the console's (``<created_at>~<id>``, pipeline.admin.jobs.page_cursor), so jobs made by
one submission (one COPY, one created_at) are told apart by their ids, never repeated or
skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from tests.fixtures.api_server import ApiServer


@pytest.fixture
def api(api_on_test_database: ApiServer) -> ApiServer:
    return api_on_test_database


def _submit(api: ApiServer, folder: Path, count: int) -> list[str]:
    sources = []
    for _ in range(count):
        path = folder / f"doc-{uuid4().hex[:8]}.md"
        path.write_text(f"# {path.name}\n")
        sources.append(str(path))
    answer = api.post("/v1/jobs", json={"sources": sources})
    assert answer.status_code == 202, answer.text
    return [row["job_id"] for row in answer.json()["accepted"]]


def _pages(api: ApiServer, **query: Any) -> list[list[dict[str, Any]]]:
    """Every page, following ``next_before`` from the first."""
    pages: list[list[dict[str, Any]]] = []
    params = dict(query)
    while True:
        answer = api.get("/v1/jobs", params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append(body["jobs"])
        if body["next_before"] is None:
            return pages
        params = {**query, "before": body["next_before"]}
        assert len(pages) < 20, "the pages never end"


def test_pages_follow_next_before_to_the_end(api: ApiServer, tmp_path: Path) -> None:
    together = _submit(api, tmp_path, 7)  # one COPY: one created_at, ties broken by id
    alone = _submit(api, tmp_path, 2)
    pages = _pages(api, limit=3)
    assert [len(page) for page in pages] == [3, 3, 3, 0]  # a full last page: one empty after it
    listed = [job["id"] for page in pages for job in page]
    assert sorted(listed) == sorted(together + alone) and len(set(listed)) == 9
    order = [(job["created_at"], job["id"]) for page in pages for job in page]
    assert order == sorted(order, reverse=True)
    assert set(listed[:2]) == set(alone)  # the later submission first

    short = _pages(api, limit=4)
    assert [len(page) for page in short] == [4, 4, 1]  # a short page is the last
    assert [job["id"] for page in short for job in page] == listed


def test_the_cursor_goes_with_the_filters(api: ApiServer, tmp_path: Path) -> None:
    mine = _submit(api, tmp_path, 5)
    _submit(api, tmp_path, 3)
    submission = api.get(f"/v1/jobs/{mine[0]}").json()["job"]["submission_id"]
    pages = _pages(api, submission=submission, state="queued", limit=2)
    assert [len(page) for page in pages] == [2, 2, 1]
    assert sorted(job["id"] for page in pages for job in page) == sorted(mine)


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor",
        "yesterday~0b4c2f0e-7d3a-4b8e-9a51-0f2d0c6f1e27",
        "2026-11-29T10:00:00~0b4c2f0e-7d3a-4b8e-9a51-0f2d0c6f1e27",  # no offset: whose time?
        "2026-11-29T10:00:00+00:00~0b4c2f0e-7d3a-4b8e-9a51-0f2d0c6f1eZZ",
        "2026-13-45T10:00:00+00:00~0b4c2f0e-7d3a-4b8e-9a51-0f2d0c6f1e27",  # the pattern's, no date
    ],
)
def test_a_damaged_cursor_is_422(api: ApiServer, cursor: str) -> None:
    answer = api.get("/v1/jobs", params={"before": cursor})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"


def test_the_document_declares_the_cursor(api: ApiServer) -> None:
    document = api.get("/openapi.json", token=None).json()
    listed = {p["name"]: p for p in document["paths"]["/v1/jobs"]["get"]["parameters"]}
    assert "before" in listed and "next_before" in listed["before"]["description"]
    job_list = document["components"]["schemas"]["JobList"]["properties"]
    assert "`before`" in job_list["next_before"]["description"]
