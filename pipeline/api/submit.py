"""``POST /v1/jobs``: sources as JSON, or one uploaded document, through ``enqueue``.

Sources are checked exactly as ``doclane submit`` checks them (``pipeline.jobs.submit``): each
refused one comes back with its E1xx code and the others go on (202). When every source is
refused nothing was accepted: the answer is an error (422; 413 for E103) whose code is the first
refusal's and whose detail is the whole answer, each refused source with its code.

An upload is stored into the inbox's uploads folder first (``pipeline.api.uploads``), then
submitted as that file; the answer names it by its file name, never by its path on the server.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Annotated, Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException

from errors import EmptySource, PipelineError, entry
from pipeline.api.errors import error_response
from pipeline.api.uploads import BadUpload, Upload, receive_upload
from pipeline.jobs.options import (
    ENV_NAME_PATTERN,
    LANGS_PATTERN,
    OPTION_NAMES,
    PAGES_PATTERN,
    check_options,
)
from pipeline.jobs.submit import Submission, check_formats, enqueue
from pipeline.queues import JOB_PRIORITY_MAX, JOB_PRIORITY_MIN, Publisher
from pipeline.sources import SourceSettings
from pipeline.store import JobStore

#: Output formats, comma-separated (what ``check_formats`` accepts, spelled out for OpenAPI).
_FORMAT = "(md|json|html|text|chunks)"
FORMATS_PATTERN = rf"^\s*{_FORMAT}\s*(,\s*{_FORMAT}\s*)*$"
PRIORITY_RANGE = {"minimum": JOB_PRIORITY_MIN, "maximum": JOB_PRIORITY_MAX}


class ConversionOptions(BaseModel):
    """A job's conversion options, in the forms ``check_options`` accepts (it normalizes them)."""

    model_config = ConfigDict(extra="forbid")

    # The patterns are published, not enforced here: check_options refuses with E110.
    pages: str | None = Field(
        default=None,
        max_length=100,
        json_schema_extra={"pattern": PAGES_PATTERN},
        description="One run of pages: 1-5 or 3.",
    )
    ocr_lang: str | None = Field(
        default=None,
        max_length=300,
        json_schema_extra={"pattern": LANGS_PATTERN},
        description="OCR language(s): en or en,de.",
    )
    text_layer_only: bool = False
    password_env: str | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={"pattern": ENV_NAME_PATTERN},
        description="The workers' environment variable holding the password (never the "
        "password itself).",
    )


#: The same options as multipart form fields (text; an absent field is an unset option).
OPTION_FIELDS: dict[str, dict[str, Any]] = {
    "pages": {"type": "string", "pattern": PAGES_PATTERN},
    "ocr_lang": {"type": "string", "pattern": LANGS_PATTERN},
    "text_layer_only": {"type": "string", "enum": ["true", "false"]},
    "password_env": {"type": "string", "pattern": ENV_NAME_PATTERN},
}


class SubmitRequest(BaseModel):
    # No NUL: no path or URL holds one (and pipeline.sources would trip over it).
    sources: list[Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")]] = (
        Field(min_length=1, max_length=10000)
    )
    to: str = Field(
        default="md",
        pattern=FORMATS_PATTERN,
        description="Output formats, comma-separated: md, json, html, text, chunks.",
    )
    priority: int = Field(default=0, ge=JOB_PRIORITY_MIN, le=JOB_PRIORITY_MAX)
    options: ConversionOptions = Field(default_factory=ConversionOptions)


class AcceptedOut(BaseModel):
    source: str
    uri: str
    job_id: str
    queue: str
    deduplicated: bool
    published: bool


class RejectedOut(BaseModel):
    source: str
    code: str
    message: str


class SubmitResponse(BaseModel):
    accepted: list[AcceptedOut]
    rejected: list[RejectedOut]
    skipped: dict[str, int]
    duplicates: int
    publish_failures: dict[str, str]


async def submit_json(
    request: Request, store: JobStore, publisher: Publisher, sources: SourceSettings
) -> SubmitResponse:
    try:
        body: Any = json.loads(await request.body())
        asked = SubmitRequest.model_validate(body)
    except json.JSONDecodeError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from exc
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc
    formats = _formats(asked.to)
    return await run_in_threadpool(
        _enqueue,
        asked.sources,
        formats,
        asked.priority,
        options=asked.options.model_dump(),
        store=store,
        publisher=publisher,
        sources=sources,
    )


async def submit_upload(
    request: Request, store: JobStore, publisher: Publisher, sources: SourceSettings
) -> SubmitResponse:
    length = request.headers.get("content-length")
    try:
        upload = await receive_upload(
            request.headers.get("content-type", ""),
            int(length) if length and length.isdigit() else None,
            request.stream(),
            inbox=sources.inbox_dir,
            max_bytes=int(sources.max_source_bytes),
        )
    except BadUpload as exc:
        raise HTTPException(400, str(exc)) from exc
    except EmptySource as exc:  # refused like any source: in the answer, with its code
        rejected = RejectedOut(
            source=str(exc.detail or "upload"), code=exc.code, message=exc.message
        )
        return SubmitResponse(
            accepted=[], rejected=[rejected], skipped={}, duplicates=0, publish_failures={}
        )
    try:
        formats = _formats(upload.fields.get("to", "md"))
        options = check_options({name: upload.fields.get(name) for name in OPTION_NAMES})
        priority = int(upload.fields.get("priority", "0") or 0)
        if not JOB_PRIORITY_MIN <= priority <= JOB_PRIORITY_MAX:
            raise ValueError(priority)
    except (ValueError, PipelineError) as exc:
        shutil.rmtree(upload.path.parent, ignore_errors=True)
        if isinstance(exc, HTTPException | PipelineError):
            raise
        raise HTTPException(422, f"priority must be an integer, not {exc}") from exc
    answer = await run_in_threadpool(
        _enqueue,
        [str(upload.path)],
        formats,
        priority,
        options=options,
        store=store,
        publisher=publisher,
        sources=sources,
    )
    if not answer.accepted:  # refused (e.g. E102): nothing will read the file
        shutil.rmtree(upload.path.parent, ignore_errors=True)
    return _named_by_file(answer, upload)


def submission_response(answer: SubmitResponse) -> JSONResponse:
    """202 with the answer when a source was accepted or none was refused (an empty folder);
    when every source was refused, an error with the first refusal's code, and the answer (each
    refused source with its code) as its detail."""
    body = answer.model_dump(mode="json")
    if answer.accepted or not answer.rejected:
        return JSONResponse(body, status_code=202)
    first = answer.rejected[0]
    row = entry(first.code)
    codes = sorted({r.code for r in answer.rejected})
    message = (
        first.message
        if len(answer.rejected) == 1
        else f"all {len(answer.rejected)} sources were refused ({', '.join(codes)}); the first: "
        f"{first.message}"
    )
    status = 413 if codes == ["E103"] else 422
    return error_response(
        status, first.code, row.title, message, row.action, retryable=False, detail=body
    )


def _named_by_file(answer: SubmitResponse, upload: Upload) -> SubmitResponse:
    """The answer with the upload named by its file name: where the server keeps it is no
    client's business (and the folder's name would tell one client where others' uploads are)."""
    folder = upload.path.parent
    prefixes = {f"{folder}{os.sep}", f"{os.path.realpath(folder)}{os.sep}"}

    def named(text: str) -> str:
        for prefix in prefixes:
            text = text.replace(prefix, "")
        return text

    for accepted in answer.accepted:
        accepted.source, accepted.uri = named(accepted.source), named(accepted.uri)
    for refused in answer.rejected:
        refused.source, refused.message = named(refused.source), named(refused.message)
    return answer


def _formats(text: str) -> tuple[str, ...]:
    try:
        return check_formats(text)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc


def _enqueue(
    items: list[str],
    formats: tuple[str, ...],
    priority: int,
    *,
    options: dict[str, Any],
    store: JobStore,
    publisher: Publisher,
    sources: SourceSettings,
) -> SubmitResponse:
    submission: Submission = enqueue(
        items,
        formats,
        priority=priority,
        publisher=publisher,
        store=store,
        source_settings=sources,
        options=options,
    )
    return SubmitResponse.model_validate(submission.to_dict())
