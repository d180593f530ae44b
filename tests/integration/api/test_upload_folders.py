"""The inbox's uploads folder keeps only the uploads a job names.

Through the real API on a real PostgreSQL: an upload deduplicated to a job made before, or
refused, is removed at once; the reconciler removes an old folder no job names (one a killed
submission left behind), and never one a job names, nor one written to a moment ago.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from uuid import UUID

import psycopg

from pipeline.jobs.model import JobState
from pipeline.queues import RecordingPublisher
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import read_settings
from pipeline.store.queries import query
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer

HOUR = 3600.0


def upload_folders(inbox: Path) -> set[Path]:
    return {p for p in (inbox / "uploads").iterdir() if p.is_dir()}


def upload(api: ApiServer, name: str, content: bytes) -> dict[str, object]:
    sent = api.post("/v1/jobs", files={"file": (name, content, "text/markdown")})
    assert sent.status_code == 202, sent.text
    [accepted] = sent.json()["accepted"]
    assert isinstance(accepted, dict)
    return accepted


def succeed(store: JobStore, job_id: UUID) -> None:
    """The job converted, as a worker would leave it (dedup matches only succeeded jobs)."""
    claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
    assert claimed is not None
    assert store.attempts.finish(job_id, claimed.attempt, {"md": "# Notes"})


def age(folder: Path, seconds: float) -> None:
    """Make everything in ``folder`` (and the folder) last written ``seconds`` ago."""
    then = time.time() - seconds
    for path in [*folder.iterdir(), folder]:
        os.utime(path, (then, then))


def test_a_deduplicated_or_refused_upload_is_removed_at_once(
    api_on_test_database: ApiServer, store: JobStore, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    first = upload(api_on_test_database, "notes.md", b"# Notes\n\nThe same words.\n")
    assert first["deduplicated"] is False
    [kept] = upload_folders(inbox)
    job = store.reads.get_job(UUID(str(first["job_id"])))
    assert job is not None and Path(job.source_uri).parent == Path(os.path.realpath(kept))
    succeed(store, job.id)

    again = upload(api_on_test_database, "again.md", b"# Notes\n\nThe same words.\n")
    assert again["deduplicated"] is True and again["job_id"] == first["job_id"]
    assert upload_folders(inbox) == {kept}, "the duplicate's copy is not kept"

    refused = api_on_test_database.post(
        "/v1/jobs", files={"file": ("notes.exe", b"MZ\x90\x00", "application/octet-stream")}
    )
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "E102"
    assert upload_folders(inbox) == {kept}
    assert Path(job.source_uri).is_file(), "the job's own upload stays"


def test_the_reconciler_removes_old_upload_folders_no_job_names(
    api_on_test_database: ApiServer, store: JobStore, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    named = upload(api_on_test_database, "named.md", b"# Named\n")
    [named_folder] = upload_folders(inbox)
    uploads = inbox / "uploads"
    # What a submission killed between its upload and its job leaves behind, as the API
    # writes it: a folder of a uuid's hex with the document in it.
    left = uploads / ("a" * 32)
    left.mkdir()
    (left / "left.md").write_text("# Left behind\n")
    empty = uploads / ("b" * 32)  # killed before its first byte
    empty.mkdir()
    streaming = uploads / ("c" * 32)  # an old folder whose document is still being written
    streaming.mkdir()
    (streaming / "big.md").write_text("# Still coming\n")
    young = uploads / ("d" * 32)  # just written: its submission may be making its job now
    young.mkdir()
    (young / "young.md").write_text("# Young\n")
    not_an_upload = uploads / "notes"
    not_an_upload.mkdir()
    for folder in (named_folder, left, empty, streaming, not_an_upload):
        age(folder, 2 * HOUR)
    os.utime(streaming / "big.md")  # written to now

    settings = read_settings(reconcile={"reconcile_upload_min_age_s": HOUR}).reconcile
    report = reconcile_once(store, RecordingPublisher(), settings, inbox_dir=inbox)

    assert sorted(report.uploads) == sorted(Path(os.path.realpath(p)) for p in (left, empty))
    assert upload_folders(inbox) == {named_folder, streaming, young, not_an_upload}
    job = store.reads.get_job(UUID(str(named["job_id"])))
    assert job is not None and job.state is JobState.QUEUED and Path(job.source_uri).is_file()
    assert report.to_dict()["removed_uploads"] == [str(p) for p in report.uploads]

    # A job that names it keeps it whatever its age, pass after pass.
    assert reconcile_once(store, RecordingPublisher(), settings, inbox_dir=inbox).uploads == []
    assert named_folder.is_dir()


def test_which_uploads_a_job_names_is_read_along_the_index(
    store: JobStore,
    raw_sql: psycopg.Connection,
    api_on_test_database: ApiServer,
    tmp_path: Path,
) -> None:
    """The sweep's question must not read every job: migration 0023's partial index answers
    it (asked with sequential scans off, as the planner would at a million jobs)."""
    upload(api_on_test_database, "named.md", b"# Named\n")
    [folder] = upload_folders(tmp_path / "inbox")
    path = os.path.join(os.path.realpath(folder), "named.md")
    assert store.operations.named_uploads([path, path + ".not"]) == {path}
    raw_sql.execute("SET enable_seqscan = off")
    plan = raw_sql.execute("EXPLAIN " + query("named_uploads"), {"paths": [path]}).fetchall()
    assert "jobs_upload_source_idx" in "\n".join(row[0] for row in plan)
