"""Every /v1 endpoint's JSON over real HTTP, on a fleet with no worker (jobs stay where the API
puts them): submit, read, list, cancel, retry, stats; and the token on each of them."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs.model import JobState
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.support.long_pdf import write_long_pdf
from tests.support.store_builders import job_in_state


@pytest.fixture
def api(api_on_test_database: ApiServer) -> ApiServer:
    return api_on_test_database


def test_a_job_through_every_endpoint(api: ApiServer, tmp_path: Path) -> None:
    doc = tmp_path / "report.md"
    doc.write_text("# Report\n")
    sent = api.post("/v1/jobs", json={"sources": [str(doc)], "to": "md,json", "priority": 2})
    assert sent.status_code == 202
    [accepted] = sent.json()["accepted"]
    assert set(accepted) == {"source", "uri", "job_id", "queue", "deduplicated", "published"}
    assert accepted["queue"] == "doclane.small" and accepted["published"] is True
    job_id = accepted["job_id"]

    detail = api.get(f"/v1/jobs/{job_id}").json()
    assert set(detail) == {"job", "error", "results", "events"}
    job = detail["job"]
    assert (job["state"], job["stage"], job["attempt"], job["formats"]) == (
        "queued", None, 0, ["json", "md"],
    )  # fmt: skip
    assert [e["to_state"] for e in detail["events"]] == ["queued"]

    again = api.post(f"/v1/jobs/{job_id}/retry").json()
    assert again == {
        "retry_of": job_id, "action": "published", "job_id": job_id, "code": None, "message": None,
    }  # fmt: skip
    cancelled = api.post(f"/v1/jobs/{job_id}/cancel").json()["job"]
    assert cancelled["id"] == job_id and cancelled["state"] == "cancelled"
    listed = api.get("/v1/jobs", params={"state": "cancelled", "since": "1h"}).json()["jobs"]
    assert [j["id"] for j in listed] == [job_id]
    resubmitted = api.post(f"/v1/jobs/{job_id}/retry").json()
    assert resubmitted["action"] == "resubmitted" and resubmitted["job_id"] != job_id
    no_result = api.get(f"/v1/jobs/{job_id}/result/md")
    assert no_result.status_code == 404 and "cancelled" in no_result.json()["error"]["message"]

    stats = api.get("/v1/stats").json()
    assert stats["jobs"] == {
        "queued": 1, "waiting": 0, "running": 0, "retrying": 0, "succeeded": 0, "failed": 0,
        "cancelled": 1,
    }  # fmt: skip
    assert stats["workers"] is None or stats["workers"] == []
    assert stats["throughput"]["last_1m"]["cancelled"] == 1

    for method, path in [
        ("GET", "/v1/stats"),
        ("GET", "/v1/jobs"),
        ("GET", f"/v1/jobs/{job_id}"),
        ("GET", f"/v1/jobs/{job_id}/result/md"),
        ("POST", f"/v1/jobs/{job_id}/cancel"),
        ("POST", f"/v1/jobs/{job_id}/retry"),
        ("POST", "/v1/jobs"),
    ]:
        refused = api.request(method, path, token=None)
        assert refused.status_code == 401, (method, path)
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == "unauthorized"
    for path in ("/healthz", "/readyz", "/metrics", "/", "/openapi.json"):
        assert api.get(path, token=None).status_code == 200, path


def test_a_retry_whose_resubmission_is_refused_is_409_with_the_refusals_code(
    api: ApiServer, tmp_path: Path
) -> None:
    doc = tmp_path / "gone.md"
    doc.write_text("# Soon gone\n")
    job_id = api.post("/v1/jobs", json={"sources": [str(doc)]}).json()["accepted"][0]["job_id"]
    assert api.post(f"/v1/jobs/{job_id}/cancel").status_code == 200
    doc.unlink()  # a cancelled job is retried as a new one, whose source is no longer there
    refused = api.post(f"/v1/jobs/{job_id}/retry")
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["title"]) == ("E101", "source not found or unreadable")
    assert error["action"] and str(doc) in error["message"]
    assert error["detail"]["retry_of"] == job_id and error["detail"]["action"] == "refused"
    assert [j["id"] for j in api.get("/v1/jobs").json()["jobs"]] == [job_id]  # nothing new

    again = api.post(f"/v1/jobs/{job_id}/cancel")  # and the state machine's own refusal
    assert again.status_code == 409 and again.json()["error"]["code"] == "wrong_state"


def test_requests_the_api_cannot_take_get_the_error_shape(api: ApiServer) -> None:
    as_json = {"Content-Type": "application/json"}
    as_text = {"Content-Type": "text/plain"}
    cases = [
        (api.post("/v1/jobs", content=b"not json", headers=as_json), 400, "invalid_request"),
        (api.post("/v1/jobs", json={"sources": []}), 422, "invalid_request"),
        (api.post("/v1/jobs", json={"sources": ["/x.md"], "to": "pdf"}), 422, "invalid_request"),
        (api.post("/v1/jobs", json={"sources": ["/x.md"], "to": ["md"]}), 422, "invalid_request"),
        (api.post("/v1/jobs", json={"sources": ["/x.md"], "options": {"dpi": 3}}), 422,
         "invalid_request"),
        (api.post("/v1/jobs", content=b"x", headers=as_text), 415, "unsupported_media_type"),
        (api.get("/v1/jobs", params={"state": "lost"}), 422, "invalid_request"),
        (api.get("/v1/jobs", params={"error_code": "101"}), 422, "invalid_request"),
        (api.get("/v1/jobs/123"), 422, "invalid_request"),
        (api.get("/v1/nothing"), 404, "not_found"),
        (api.request("DELETE", "/v1/stats"), 405, "method_not_allowed"),
    ]  # fmt: skip
    for response, status, code in cases:
        body = response.json()
        assert (response.status_code, body["error"]["code"]) == (status, code), body
        assert set(body["error"]) == {"code", "title", "message", "action", "retryable", "detail"}


def test_a_result_expired_by_retention_is_410_with_e113(
    api: ApiServer, make_store: Callable[[], JobStore]
) -> None:
    store = make_store()
    job = job_in_state(store, JobState.SUCCEEDED)
    assert api.get(f"/v1/jobs/{job.id}/result/md").text == "# result md"
    later = datetime.now(UTC) + timedelta(minutes=5)  # every result is older than this
    assert store.operations.expire_results(later, limit=10) == [(job.id, "md")]

    gone = api.get(f"/v1/jobs/{job.id}/result/md")

    assert gone.status_code == 410
    assert gone.json()["error"]["code"] == "E113"
    assert api.get(f"/v1/jobs/{job.id}").json()["job"]["state"] == "succeeded"


# ---- conversion options: checked (E110), stored normalized, a password only by its name
def test_json_options_are_stored_normalized_and_part_of_dedup(
    api: ApiServer, tmp_path: Path
) -> None:
    doc = tmp_path / "report.md"
    doc.write_text("# Report\n")
    options = {"pages": " 2 - 5", "ocr_lang": "en", "password_env": "REPORT_PW"}
    sent = api.post("/v1/jobs", json={"sources": [str(doc)], "to": "md,text", "options": options})
    assert sent.status_code == 202, sent.text
    job_id = sent.json()["accepted"][0]["job_id"]
    job = api.get(f"/v1/jobs/{job_id}").json()["job"]
    assert job["options"] == {"pages": "2-5", "ocr_lang": "en", "password_env": "REPORT_PW"}
    assert job["formats"] == ["md", "text"]

    other = api.post("/v1/jobs", json={"sources": [str(doc)], "options": {"pages": "1"}})
    assert other.json()["accepted"][0]["job_id"] != job_id


@pytest.mark.parametrize(
    "options",
    [
        {"pages": "0-3"},
        {"pages": "5-2"},
        {"pages": "1,3"},
        {"password_env": "A PASSWORD"},
        {"ocr_lang": "e n"},
    ],
)
def test_a_bad_option_is_refused_with_e110(
    api: ApiServer, tmp_path: Path, options: dict[str, str]
) -> None:
    doc = tmp_path / "report.md"
    doc.write_text("# Report\n")
    refused = api.post("/v1/jobs", json={"sources": [str(doc)], "options": options})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "E110"
    assert api.get("/v1/jobs").json()["jobs"] == []


def test_a_page_range_past_a_pdfs_end_is_refused_at_submission_with_the_others_accepted(
    api: ApiServer, tmp_path: Path
) -> None:
    pdf = write_long_pdf(tmp_path / "brief.pdf", pages=2)
    doc = tmp_path / "report.md"
    doc.write_text("# Report\n")
    options = {"pages": "999"}
    sent = api.post("/v1/jobs", json={"sources": [str(pdf), str(doc)], "options": options})
    assert sent.status_code == 202, sent.text
    body = sent.json()
    assert [a["uri"] for a in body["accepted"]] == [str(doc)]
    assert body["rejected"] == [
        {
            "source": str(pdf),
            "code": "E110",
            "message": "page range 999 is past the end of brief.pdf, which has pages 1-2",
        }
    ]
    uploaded = api.post(
        "/v1/jobs",
        files={"file": ("brief.pdf", pdf.read_bytes(), "application/pdf")},
        data=options,
    )
    assert uploaded.status_code == 422, uploaded.text  # the one document refused: nothing made
    assert uploaded.json()["error"]["code"] == "E110"
    assert len(api.get("/v1/jobs").json()["jobs"]) == 1


def test_multipart_fields_carry_the_options(api: ApiServer, store: JobStore) -> None:
    hook = "https://hooks.example.org/doclane"
    sent = api.post(
        "/v1/jobs",
        files={"file": ("notes.md", b"# Notes\n", "text/markdown")},
        data={"to": "chunks", "pages": "1-2", "text_layer_only": "true", "webhook": hook},
    )
    assert sent.status_code == 202, sent.text
    job_id = sent.json()["accepted"][0]["job_id"]
    job = api.get(f"/v1/jobs/{job_id}").json()["job"]
    assert job["options"] == {"pages": "1-2", "text_layer_only": True}
    assert job["formats"] == ["chunks"]
    stored = store.reads.get_job(UUID(job_id))
    assert stored is not None and stored.webhook_url == hook
    form = api.get("/openapi.json", token=None).json()["paths"]["/v1/jobs"]["post"]
    declared = form["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]
    assert {"file", "to", "priority", "tenant", "webhook", "pages"} <= set(declared)

    bad = api.post(
        "/v1/jobs",
        files={"file": ("notes.md", b"# Other\n", "text/markdown")},
        data={"pages": "two"},
    )
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "E110"


# ---- the door: what no configured server can serve is refused whole (E305, 422), no job made
def test_a_submission_no_configured_server_can_serve_is_422_e305(
    make_api_server: Callable[..., ApiServer],
    migrated_database_url: str,
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
        "DOCLING_MCP_ORIGIN": fake_server.url,  # a docling-mcp server: no options, md only
    }
    api = make_api_server(env)
    doc = tmp_path / "report.md"
    doc.write_text("# Report\n")

    paged = api.post("/v1/jobs", json={"sources": [str(doc)], "options": {"pages": "1"}})
    assert paged.status_code == 422, paged.text
    error = paged.json()["error"]
    assert error["code"] == "E305" and "cannot honour conversion options" in error["message"]
    html = api.post(
        "/v1/jobs",
        files={"file": ("notes.md", b"# Notes\n", "text/markdown")},
        data={"to": "html"},
    )
    assert html.status_code == 422 and html.json()["error"]["code"] == "E305"
    assert api.get("/v1/jobs").json()["jobs"] == []
    assert not any((tmp_path / "inbox" / "uploads").glob("*/*"))  # nothing kept of the upload

    plain = api.post("/v1/jobs", json={"sources": [str(doc)]})
    assert plain.status_code == 202, plain.text
    asked = fake_server.stats()["requests_by_method"].get("tools/list", 0)
    assert asked == 1  # one question for the two refusals; Markdown alone needed none
