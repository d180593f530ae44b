"""A NUL byte in a request's text is the caller's mistake on every route, never a server error.

PostgreSQL's text holds none; the store refuses one with E117 wherever it came from, so a field
no schema pattern covers (an upload's form fields) is answered 422 E117 like a documented one is
refused, and the console says so on its page. Through the real API on a real PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.fixtures.api_server import ApiServer


def _uploads(inbox: Path) -> list[Path]:
    return [p for p in (inbox / "uploads").iterdir() if p.is_dir()]


def test_an_uploads_field_with_a_nul_is_e117_and_the_upload_is_removed(
    api_on_test_database: ApiServer, tmp_path: Path
) -> None:
    api = api_on_test_database
    sent = api.post(
        "/v1/jobs",
        files={"file": ("notes.md", b"# Notes\n", "text/markdown")},
        data={"webhook": "https://hooks.example.org/done\x00"},
    )
    assert sent.status_code == 422, sent.text
    error = sent.json()["error"]
    assert error["code"] == "E117" and "cannot contain a NUL byte" in error["message"]
    assert _uploads(tmp_path / "inbox") == []  # no job reads it: removed at once
    assert api.get("/v1/jobs").json()["jobs"] == []


def test_the_consoles_filters_say_a_nul_is_refused(api_on_test_database: ApiServer) -> None:
    api = api_on_test_database
    with httpx.Client(base_url=api.url, follow_redirects=False) as browser:
        signed = browser.post("/console/login", data={"token": api.token, "next": "/console/jobs"})
        assert signed.status_code == 303
        page = browser.get("/console/jobs", params={"queue": "doclane.\x00small"})
    assert page.status_code == 200, page.text
    assert 'id="problem"' in page.text and "cannot contain a NUL byte" in page.text
