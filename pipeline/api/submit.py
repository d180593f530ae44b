"""``POST /v1/jobs``: sources as JSON, or one uploaded document, through ``enqueue``.

The body (or the upload's form) is parsed here, once, into a ``SubmissionRequest``: ``to`` into
``Formats``, ``options`` into ``ConversionOptions`` (E110 names a bad one). Sources are checked
exactly as ``doclane submit`` checks them (``pipeline.submission``): each refused one comes
back with its E1xx code and the others go on (202); a submission no configured server can serve
is refused whole (E305, 422). When every source is
refused nothing was accepted: the answer is an error (422; 413 for E103) whose code is the first
refusal's and whose detail is the whole answer, each refused source with its code.

An upload is stored into the inbox's uploads folder first (``pipeline.api.uploads``), then
submitted as that file; the answer names it by its file name, never by its path on the server.
An upload no new job reads (refused, or deduplicated to a job made before) is removed at once;
one left behind otherwise is the reconciler's (``pipeline.reconciler.uploads``).

Whose jobs they are: a token of a tenant submits as that tenant, always; a ``tenant`` field
naming another is refused (403, E109) rather than ignored, so a client that thinks it may choose
learns at once that it may not. A token of no tenant may name any tenant that exists (E116
otherwise), ``default`` when it names none. When every source was refused for the tenant's
queue quota (E115), the answer is 429 with ``Retry-After`` (``pipeline.api.quota``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from typing import Annotated, Any
from uuid import uuid4

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from starlette.exceptions import HTTPException

from errors import (
    EmptySource,
    InvalidArgument,
    MissingCapability,
    PipelineError,
    RoleForbidden,
    UnknownTenant,
    UrlRefused,
    entry,
)
from pipeline.access.audit import submission_detail as audited_submission
from pipeline.api.auth import Caller
from pipeline.api.context import ApiContext
from pipeline.api.errors import error_response
from pipeline.api.uploads import BadUpload, Upload, receive_upload
from pipeline.jobs.formats import DEFAULT_FORMATS, Formats
from pipeline.jobs.options import (
    ENV_NAME_PATTERN,
    LANGS_PATTERN,
    OPTION_NAMES,
    PAGES_PATTERN,
    ConversionOptions,
)
from pipeline.jobs.request import SubmissionRequest
from pipeline.jobs.tenants import DEFAULT_TENANT, TENANT_PATTERN
from pipeline.queues import JOB_PRIORITY_MAX, JOB_PRIORITY_MIN
from pipeline.store.connection import TEXT_PATTERN
from pipeline.submission.intake import Submission, enqueue

PRIORITY_RANGE = {"minimum": JOB_PRIORITY_MIN, "maximum": JOB_PRIORITY_MAX}
#: An http(s) URL with a host name (ASCII: an international name in its xn-- form) or IPv4
#: address and, if any, a port in range: what ``check_webhook_url`` asks but for the address
#: policy, which refuses with E104.
WEBHOOK_PATTERN = (
    r"^https?://[A-Za-z0-9._~%!$&'()*+,;=-]+"
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?"
    r"([/?#][^\s\x00]*)?$"
)


#: The same options as multipart form fields (text; an absent field is an unset option).
OPTION_FIELDS: dict[str, dict[str, Any]] = {
    "pages": {"type": "string", "pattern": PAGES_PATTERN},
    "ocr_lang": {"type": "string", "pattern": LANGS_PATTERN},
    "text_layer_only": {"type": "string", "enum": ["true", "false"]},
    "password_env": {"type": "string", "pattern": ENV_NAME_PATTERN},
}


class SubmitRequest(BaseModel):
    # No NUL: no path or URL holds one.
    sources: list[Annotated[str, Field(max_length=4096, pattern=TEXT_PATTERN)]] = Field(
        min_length=1, max_length=10000
    )
    to: Formats = Field(
        default_factory=lambda: DEFAULT_FORMATS,
        description="Output formats, comma-separated: md, json, html, text, chunks.",
        json_schema_extra={"default": "md"},
    )
    priority: int = Field(default=0, ge=JOB_PRIORITY_MIN, le=JOB_PRIORITY_MAX)
    options: ConversionOptions = Field(default_factory=ConversionOptions)
    webhook: str | None = Field(
        default=None,
        max_length=4096,
        pattern=WEBHOOK_PATTERN,
        description="POST a signed event (Standard Webhooks) here when each job ends "
        "(default: the server's DOCLANE_WEBHOOK_URL).",
    )
    tenant: str | None = Field(
        default=None,
        pattern=TENANT_PATTERN,
        description="Whose jobs these are: a token of a tenant submits as it (naming another "
        "is refused, 403); a token of no tenant may name any (default: default).",
    )

    @field_validator("to", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        """``to`` is text on the wire, as the schema says (``Formats`` would take a list)."""
        if not isinstance(value, str):
            raise ValueError("to is text: output formats separated by commas")
        return value

    def request(self, tenant: str) -> SubmissionRequest:
        return SubmissionRequest(
            self.sources,
            self.to,
            self.options,
            self.priority,
            webhook_url=self.webhook,
            tenant=tenant,
        )


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
    #: ``GET /v1/jobs?submission=`` lists this submission's jobs.
    submission_id: str
    #: Whose jobs they are.
    tenant: str = DEFAULT_TENANT
    accepted: list[AcceptedOut]
    rejected: list[RejectedOut]
    skipped: dict[str, int]
    duplicates: int
    publish_failures: dict[str, str]


def tenant_of(caller: Caller, asked: str | None) -> str:
    """The tenant a submission is made as: the token's, when it has one (E109 for a request
    that names another); else the one asked (None: none asked), or ``default``."""
    own = caller.scope.tenant
    if own is None:
        return asked if asked is not None else DEFAULT_TENANT
    if asked is not None and asked != own:
        raise RoleForbidden(
            f"the token {caller.name!r} submits as the tenant {own!r} only",
            detail={"token": caller.name, "tenant": own, "asked": asked},
        )
    return own


async def submit_json(request: Request, ctx: ApiContext, caller: Caller) -> SubmitResponse:
    try:
        body: Any = json.loads(await request.body())
        asked = SubmitRequest.model_validate(body)
    except json.JSONDecodeError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from exc
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc
    tenant = tenant_of(caller, asked.tenant)
    return await run_in_threadpool(_enqueue, asked.request(tenant), ctx)


async def submit_upload(request: Request, ctx: ApiContext, caller: Caller) -> SubmitResponse:
    sources = ctx.sources
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
            submission_id=str(uuid4()),
            tenant=tenant_of(caller, None),
            accepted=[],
            rejected=[rejected],
            skipped={},
            duplicates=0,
            publish_failures={},
        )
    try:
        asked = _upload_request(upload, caller)
    except (HTTPException, PipelineError):
        shutil.rmtree(upload.path.parent, ignore_errors=True)
        raise
    try:
        answer = await run_in_threadpool(_enqueue, asked, ctx)
    except (UrlRefused, MissingCapability, UnknownTenant, InvalidArgument):  # refused whole
        shutil.rmtree(upload.path.parent, ignore_errors=True)
        raise
    if not any(not accepted.deduplicated for accepted in answer.accepted):
        # Refused (E102, say), or the same document as a job already made: no job will read
        # this copy. Anything else that goes wrong is left to the reconciler, which removes
        # the folder once it is old and no job names it (a job may have been made before).
        shutil.rmtree(upload.path.parent, ignore_errors=True)
    return _named_by_file(answer, upload)


def submission_detail(answer: SubmitResponse) -> dict[str, Any]:
    """What the audit trail keeps of a submission answered over HTTP."""
    return audited_submission(
        tenant=answer.tenant,
        submission_id=answer.submission_id,
        jobs=len(answer.accepted),
        refused=len(answer.rejected),
    )


def submission_response(
    answer: SubmitResponse, *, retry_after: Callable[[int], int] | None = None
) -> JSONResponse:
    """202 with the answer when a source was accepted (sources that named no document at
    all never get here: E119, 422); when every source was refused, an error with the first
    refusal's code, and the answer (each refused source with its code) as its detail: 429 when
    every one was refused for the tenant's quota (E115), with ``Retry-After:
    retry_after(refused)`` seconds."""
    body = answer.model_dump(mode="json")
    if answer.accepted or not answer.rejected:
        return JSONResponse(body, status_code=202)
    first = answer.rejected[0]
    if all(r.code == "E115" for r in answer.rejected):
        seconds = retry_after(len(answer.rejected)) if retry_after else None
        row = entry("E115")
        refused = error_response(
            429,
            "E115",
            row.title,
            first.message,
            row.action,
            retryable=True,
            detail={**body, "retry_after": seconds},
        )
        if seconds is not None:
            refused.headers["Retry-After"] = str(seconds)
        return refused
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


def _upload_request(upload: Upload, caller: Caller) -> SubmissionRequest:
    """The upload's form fields, parsed: 422 for a bad ``to``, priority or tenant, E110 for a
    bad option, E109 for a tenant not the token's."""
    fields = upload.fields
    asked_tenant = fields.get("tenant")  # present but empty is refused, as the JSON body's
    if asked_tenant is not None and not re.match(TENANT_PATTERN, asked_tenant):
        raise HTTPException(422, f"not a tenant name: {asked_tenant!r}")
    tenant = tenant_of(caller, asked_tenant)
    try:
        formats = Formats.parse(fields.get("to", "md"))
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    options = ConversionOptions.parse({name: fields.get(name) for name in OPTION_NAMES})
    try:
        priority = int(fields.get("priority", "0") or 0)
        if not JOB_PRIORITY_MIN <= priority <= JOB_PRIORITY_MAX:
            raise ValueError(priority)
    except ValueError as exc:
        raise HTTPException(422, f"priority must be an integer, not {exc}") from exc
    return SubmissionRequest(
        [str(upload.path)],
        formats,
        options,
        priority,
        webhook_url=fields.get("webhook") or None,
        tenant=tenant,
    )


def _enqueue(asked: SubmissionRequest, ctx: ApiContext) -> SubmitResponse:
    """``asked`` made into jobs with the sections of the API process's one settings tree."""
    submission: Submission = enqueue(
        asked,
        publisher=ctx.publisher,
        store=ctx.store,
        source_settings=ctx.tree.sources,
        submit_settings=ctx.tree.submit,
        webhook_settings=ctx.tree.webhooks,
        door=ctx.door,
    )
    return SubmitResponse.model_validate({**submission.to_dict(), "tenant": asked.tenant})
