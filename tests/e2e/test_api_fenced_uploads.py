"""Uploads on a fleet fenced by DOCLANE_ALLOWED_ROOTS, through the real HTTP API and a worker.

An operator who fences user paths must not fence doclane's own uploads: the upload converts,
the answer names it by its file name (never by the server's inbox path), and a submission whose
every source is refused is an error with each code, not a 202 with nothing accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from pipeline.jobs.model import JobState
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.workers import Cluster


@pytest.fixture
def fenced(tmp_path: Path) -> Path:
    """The folder DOCLANE_ALLOWED_ROOTS names: users' documents, not doclane's inbox."""
    folder = tmp_path / "users-documents"
    folder.mkdir()
    return folder


@pytest.fixture
def cluster(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    fenced: Path,
) -> Cluster:
    return make_cluster(redis_broker, fake_server.url, DOCLANE_ALLOWED_ROOTS=str(fenced))


def test_an_upload_converts_on_a_fleet_with_allowed_roots(
    cluster: Cluster, make_api_server: Callable[..., ApiServer], fenced: Path
) -> None:
    inbox = Path(cluster.env["DOCLANE_INBOX_DIR"])
    assert not inbox.is_relative_to(fenced)
    cluster.start_worker(concurrency=1)
    api = make_api_server(cluster.env)

    sent = api.post(
        "/v1/jobs",
        files={"file": ("fenced notes.md", b"# Fenced\n\nUploaded past the fence.\n")},
        data={"to": "md"},
    )
    assert sent.status_code == 202, sent.text
    body = sent.json()
    assert body["rejected"] == []
    [accepted] = body["accepted"]
    assert (accepted["source"], accepted["uri"]) == ("fenced notes.md", "fenced notes.md")
    assert str(inbox) not in sent.text and "/uploads/" not in sent.text
    job_id = UUID(accepted["job_id"])
    [job] = cluster.wait_terminal([job_id])
    assert job.state is JobState.SUCCEEDED, (job.error_code, job.error_message)
    assert "Uploaded past the fence" in api.get(f"/v1/jobs/{job_id}/result/md").text


def test_a_submission_whose_every_source_is_refused_is_an_error_with_each_code(
    cluster: Cluster, make_api_server: Callable[..., ApiServer], fenced: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# not in the fence\n")
    api = make_api_server(cluster.env)

    both = api.post("/v1/jobs", json={"sources": [str(outside), str(fenced / "missing.md")]})
    assert both.status_code == 422, both.text
    error = both.json()["error"]
    assert error["code"] == "E105" and error["retryable"] is False
    assert [(r["source"], r["code"]) for r in error["detail"]["rejected"]] == [
        (str(outside), "E105"),
        (str(fenced / "missing.md"), "E101"),
    ]
    assert error["detail"]["accepted"] == []

    empty = api.post("/v1/jobs", files={"file": ("blank.md", b"")})
    assert empty.status_code == 422, empty.text
    assert empty.json()["error"]["code"] == "E106"
    assert [r["source"] for r in empty.json()["error"]["detail"]["rejected"]] == ["blank.md"]

    unsupported = api.post("/v1/jobs", files={"file": ("tool.exe", b"MZ\x90\x00")})
    assert unsupported.status_code == 422, unsupported.text
    refusal = unsupported.json()["error"]
    assert refusal["code"] == "E102"
    assert refusal["detail"]["rejected"][0]["source"] == "tool.exe"
    assert str(cluster.env["DOCLANE_INBOX_DIR"]) not in unsupported.text

    (fenced / "inside.md").write_text("# inside the fence\n")
    one_of_two = api.post("/v1/jobs", json={"sources": [str(outside), str(fenced)]})
    assert one_of_two.status_code == 202  # one accepted: the answer says which was refused
    assert [r["code"] for r in one_of_two.json()["rejected"]] == ["E105"]
    assert len(one_of_two.json()["accepted"]) == 1
