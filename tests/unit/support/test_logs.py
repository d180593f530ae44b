"""Job-aware log lines: job id, attempt and origin on every record; secrets never."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from pipeline.settings.tree import read_settings
from pipeline.support.logs import (
    configure_logging,
    current_job_context,
    enter_job_context,
    job_context,
    leave_job_context,
    update_job_context,
)
from pipeline.support.secrets import Masker


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, logging.Logger]]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    yield stream, logging.getLogger("doclane.test")
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def test_text_lines_carry_the_job_attempt_and_origin(
    captured: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = captured
    configure_logging(read_settings(logs=dict(format="text", level="INFO")).logs, stream)
    log.info("outside")
    with job_context("job-1"):
        log.info("claimed")
        update_job_context(attempt=2, origin="http://docling:8765")
        log.info("converted")
    lines = stream.getvalue().splitlines()
    assert "[job=- attempt=- origin=-] outside" in lines[0]
    assert "[job=job-1 attempt=- origin=-] claimed" in lines[1]
    assert "[job=job-1 attempt=2 origin=http://docling:8765] converted" in lines[2]
    assert current_job_context() is None


def test_json_lines_have_the_job_fields_at_the_top_level(
    captured: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = captured
    configure_logging(read_settings(logs=dict(format="json")).logs, stream)
    with job_context("job-2", attempt=1):
        update_job_context(origin="http://a:1")
        try:
            raise RuntimeError("boom with password=hunter2")
        except RuntimeError:
            log.exception("failed talking to %s", "amqp://guest:s3cret@rabbit:5672//")
    record = json.loads(stream.getvalue().splitlines()[-1])
    assert (record["job_id"], record["attempt"], record["origin"]) == ("job-2", 1, "http://a:1")
    assert record["level"] == "ERROR"
    assert "s3cret" not in stream.getvalue() and "hunter2" not in stream.getvalue()
    assert "amqp://guest:***@rabbit:5672//" in record["message"]
    assert "RuntimeError" in record["exception"]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("redis://:topsecret@host:6379/0", "topsecret"),
        ("postgresql://app:pw123@db/doclane", "pw123"),
        ("Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
        ("X-API-Key=k-9f8e7d", "k-9f8e7d"),
        ('{"token": "t0k3n"}', "t0k3n"),
        ("{'api_key': 'py-repr-key'}", "py-repr-key"),
        ("DOCLANE_MCP_API_KEY=env-key-1", "env-key-1"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("claimed https://cdn.example/a.pdf?access_token=qtok123&x=1", "qtok123"),
        ("https://s3.example/b.docx?X-Amz-Credential=AKIA1/x&X-Amz-Signature=5ig", "5ig"),
        ("https://s3.example/b.docx?X-Amz-Credential=AKIA1/x&X-Amz-Signature=5ig", "AKIA1"),
        ("https://blob.example/c.docx?sv=2024&sig=azsig%2Bv", "azsig"),
    ],
)
def test_redaction_masks_credentials(text: str, secret: str) -> None:
    cleaned = Masker().text(text)
    assert secret not in cleaned
    assert "***" in cleaned


@pytest.mark.parametrize(
    "text",
    [
        "converted /data/a.docx at http://127.0.0.1:8765/mcp in 0.7s",
        "claimed file source /srv/inbox/tokens-report.docx (attempt 1, 1 of 3 charged)",
        "https://example.org/page.html?lang=en&page=2",
        "export_docling_document_to_markdown ok in 0.011s",
    ],
)
def test_redaction_leaves_ordinary_text_alone(text: str) -> None:
    assert Masker().text(text) == text


def test_what_the_processor_learns_stays_on_the_task_context_celery_opened(
    captured: tuple[io.StringIO, logging.Logger],
) -> None:
    stream, log = captured
    configure_logging(read_settings(logs=dict(format="text")).logs, stream)
    token = enter_job_context("job-3")  # Celery's task_prerun
    with job_context("job-3"):  # the processor, for the same job
        update_job_context(attempt=4, origin="http://b:2")
    log.info("Task doclane.drain[job-3] succeeded")  # Celery's trace line, after the processor
    leave_job_context(token)
    assert "[job=job-3 attempt=4 origin=http://b:2] Task" in stream.getvalue()
    assert current_job_context() is None


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_celerys_per_task_lines_show_only_at_debug(
    captured: tuple[io.StringIO, logging.Logger],
    monkeypatch: pytest.MonkeyPatch,
    level: str,
    shown: bool,
) -> None:
    """The processor's "claimed" and "succeeded" lines say what Celery's say; its warnings stay."""
    from workers import app as worker_app

    loggers = [logging.getLogger(name) for name in worker_app.CELERY_PER_TASK_LOGGERS]
    saved = [logger.level for logger in loggers]
    monkeypatch.setenv("DOCLANE_LOG_LEVEL", level)
    try:
        worker_app._setup_logging()
        stream = io.StringIO()
        logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
        for logger in loggers:
            logger.info("Task doclane.drain[job-1] succeeded in 0.01s")
            logger.warning("Task doclane.drain[job-2] raised")
        text = stream.getvalue()
    finally:
        for logger, level_before in zip(loggers, saved, strict=True):
            logger.setLevel(level_before)
    assert ("job-1" in text) is shown
    assert text.count("job-2") == len(loggers)
