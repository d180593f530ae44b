"""``retry_failed`` resubmits what failed, matching the filters, and notes the successor on the
old job; a presigned URL goes out whole (the worker must fetch it) yet is matched back by the
masked form everyone else sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from errors import SourceNotFound
from pipeline.admin.jobs import retry_failed
from pipeline.jobs.model import JobState, NewJob, SourceKind
from pipeline.jobs.tenants import EVERY_TENANT
from pipeline.queues import RecordingPublisher
from pipeline.store.scoped import TenantView
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.support.long_pdf import write_long_pdf

SECRET_URL = "http://127.0.0.1:9/doc.docx?X-Amz-Signature=abcdef0123456789&X-Amz-Expires=60"


def _failed(store: JobStore, spec: NewJob) -> None:
    job_id = store.submissions.create(spec).job_id
    assert store.attempts.claim(job_id, "w", 60) is not None
    assert store.attempts.fail(job_id, 1, SourceNotFound("gone"))


def test_failed_jobs_come_back_as_new_jobs_and_the_old_ones_say_so(
    store_settings: StoreSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCLANE_ALLOW_PRIVATE_URLS", "true")
    store = JobStore(store_settings, explain_missing_schema=True)
    doc = tmp_path / "a.md"
    doc.write_text("# again\n")
    _failed(store, NewJob(source_kind=SourceKind.FILE, source_uri=str(doc), queue="doclane.small"))
    _failed(
        store,
        NewJob(
            source_kind=SourceKind.URL,
            source_uri="http://127.0.0.1:9/doc.docx?X-Amz-Signature=***&X-Amz-Expires=60",
            source_fetch_uri=SECRET_URL,
            queue="doclane.large",
        ),
    )
    store.submissions.create(
        NewJob(source_kind=SourceKind.FILE, source_uri="/x.md", queue="doclane.small")
    )
    publisher = RecordingPublisher()
    try:
        outcomes = retry_failed(TenantView(store, EVERY_TENANT), publisher, error_code="E101")
        assert [o.action for o in outcomes] == ["resubmitted", "resubmitted"]
        new = store.reads.get_jobs([o.job_id for o in outcomes if o.job_id])
        assert all(j.state is JobState.QUEUED for j in new)
        url_job = next(j for j in new if j.source_kind is SourceKind.URL)
        assert url_job.fetch_uri == SECRET_URL and "abcdef" not in url_job.source_uri
        assert len(publisher.messages) == 2
        for outcome in outcomes:
            notes = [e for e in store.reads.events(outcome.retry_of) if e.kind.value == "note"]
            assert (notes[-1].detail or {})["retried_as"] == str(outcome.job_id)
        assert retry_failed(TenantView(store, EVERY_TENANT), publisher, error_code="E303") == []
    finally:
        store.close()


def test_a_retried_job_keeps_its_conversion_options(
    store_settings: StoreSettings, tmp_path: Path
) -> None:
    store = JobStore(store_settings, explain_missing_schema=True)
    doc = tmp_path / "report.md"
    doc.write_text("# again\n")
    options = {"pages": "1-2", "password_env": "REPORT_PW"}
    _failed(
        store,
        NewJob(
            source_kind=SourceKind.FILE,
            source_uri=str(doc),
            queue="doclane.small",
            formats=("chunks", "md"),
            options=options,
        ),
    )
    try:
        (outcome,) = retry_failed(
            TenantView(store, EVERY_TENANT), RecordingPublisher(), error_code="E101"
        )
        assert outcome.job_id is not None
        (again,) = store.reads.get_jobs([outcome.job_id])
        assert again.options == options and again.formats == ("chunks", "md")
    finally:
        store.close()


def test_a_failed_slice_is_retried_through_its_document_only(
    store_settings: StoreSettings, tmp_path: Path
) -> None:
    store = JobStore(store_settings, explain_missing_schema=True)
    pdf = write_long_pdf(tmp_path / "long.pdf", pages=3)
    spec = NewJob(
        source_kind=SourceKind.FILE, source_uri=str(pdf), queue="doclane.small", slices=("1", "2-3")
    )
    made = store.submissions.create(spec)
    slice_id = made.slice_ids[1]
    assert store.attempts.claim(slice_id, "w", 60) is not None
    assert store.attempts.fail(slice_id, 1, SourceNotFound("gone"))
    try:
        outcomes = retry_failed(
            TenantView(store, EVERY_TENANT), RecordingPublisher(), error_code="E101"
        )
        assert [(o.retry_of, o.action) for o in outcomes] == [(made.job_id, "resubmitted")]
    finally:
        store.close()
