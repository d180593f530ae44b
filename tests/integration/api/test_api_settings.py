"""The API submits with the settings tree its process read once (``doclane api`` reads it and
hands it down): the door that judges what the servers can give, and the submission's own
defaults, come from that tree, never from the environment at each request."""

from __future__ import annotations

import secrets
from pathlib import Path
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from pipeline.api.app import create_app
from pipeline.api.context import ApiContext
from pipeline.queues import RecordingPublisher
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# a\n")
    return folder


def test_a_submission_is_judged_and_made_by_the_tree_the_api_was_given(
    store: JobStore, docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = secrets.token_urlsafe(16)
    tree = read_settings(
        api=dict(api_token=token),
        profiles=dict(profile="docling-mcp"),
        submit=dict(profile="docling-mcp", max_attempts=5),
        sources=dict(allowed_roots=(docs,), inbox_dir=tmp_path / "inbox"),
    )
    # What the environment says once the API runs is not what the API was started with.
    monkeypatch.setenv("DOCLANE_PROFILE", "docling-rs")
    monkeypatch.setenv("DOCLANE_MAX_ATTEMPTS", "2")
    publisher = RecordingPublisher()
    ctx = ApiContext(tree=tree, store=store, publisher=publisher, fleet=None)
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(ctx), base_url="http://127.0.0.1") as client:
        # docling-mcp takes no conversion options: the tree's door refuses them at the door
        refused = client.post(
            "/v1/jobs",
            json={"sources": [str(docs / "a.md")], "to": "md", "options": {"pages": "1-2"}},
            headers=auth,
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "E305"
        assert publisher.messages == []

        made = client.post("/v1/jobs", json={"sources": [str(docs / "a.md")]}, headers=auth)
    assert made.status_code == 202, made.text
    (job_id,) = [UUID(item["job_id"]) for item in made.json()["accepted"]]
    assert [m.queue for m in publisher.messages] == ["doclane.small"]  # its queue was rung
    job = store.reads.get_job(job_id)
    assert job is not None
    assert (job.profile, job.max_attempts) == ("docling-mcp", 5)
