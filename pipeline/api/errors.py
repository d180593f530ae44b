"""One JSON shape for every error the API answers: ``{"error": {"code": ..., ...}}``.

A catalog error keeps its code (E103, E401, E108 no such job, E109 not for this token's role,
...) and the catalog's texts; what the catalog does not cover (no token, a malformed request)
gets a short word for a code, so clients switch on ``error.code`` whatever went wrong. Nothing
leaves as a bare 500 page.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from errors import PipelineError, UnexpectedError, entry
from pipeline.admin.jobs import WrongState

log = logging.getLogger("doclane.api")


class ApiError(BaseModel):
    code: str
    title: str
    message: str
    action: str = ""
    retryable: bool = False
    detail: Any = None


class ErrorResponse(BaseModel):
    error: ApiError


#: What a client should do about the errors the catalog does not cover, by code.
_HTTP_CODES: dict[int, tuple[str, str, str]] = {
    400: ("invalid_request", "invalid request", "Fix the request and send it again."),
    401: ("unauthorized", "unauthorized", "Send Authorization: Bearer <your API token>."),
    404: ("not_found", "not found", "Check the URL (GET /openapi.json lists the endpoints)."),
    405: ("method_not_allowed", "method not allowed", "Check the method (see /openapi.json)."),
    413: ("too_large", "request too large", "Send a smaller document."),
    415: (
        "unsupported_media_type",
        "unsupported media type",
        "Send application/json or multipart/form-data.",
    ),
    422: ("invalid_request", "invalid request", "Fix the fields named in detail."),
}


def error_response(
    status: int, code: str, title: str, message: str, action: str = "", **extra: Any
) -> JSONResponse:
    body = ErrorResponse(
        error=ApiError(code=code, title=title, message=message, action=action, **extra)
    )
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(jsonable_encoder(body), status_code=status, headers=headers)


#: Catalog codes whose HTTP status is not their family's.
#: E305 is a submission refused at the door: no configured server can give what it asks.
_STATUS_OF_CODE = {
    "E103": 413,
    "E108": 404,
    "E109": 403,
    "E113": 410,
    "E114": 429,
    "E122": 429,
    "E124": 401,
    "E305": 422,
}


def catalog_status(exc: PipelineError) -> int:
    """E103 413, E108 404, E109 403, E113 410 (the results are gone for good), E114 429 (too
    many failed sign-ins), E305 422 (no configured server can serve the submission); other
    input errors 422; the database or a server down 503; the rest 502."""
    if exc.code in _STATUS_OF_CODE:
        return _STATUS_OF_CODE[exc.code]
    if exc.code.startswith("E1"):
        return 422
    if exc.code == "E399":
        return 500
    return 503 if exc.retryable else 502


def catalog_response(exc: PipelineError) -> JSONResponse:
    """The error's JSON answer; one that says when to try again (a rate limit's) says it in
    ``Retry-After`` too, in whole seconds."""
    body = exc.to_dict()
    answer = error_response(
        catalog_status(exc),
        exc.code,
        body["title"],
        exc.message,
        exc.action,
        retryable=exc.retryable,
        detail=body.get("detail"),
    )
    if exc.retry_after is not None and answer.status_code == 429:
        answer.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return answer


def refusal_response(status: int, code: str, message: str, detail: Any = None) -> JSONResponse:
    """An error answer for a refusal reported by code rather than raised (a retry's
    resubmission refused by the door or the source checks): the catalog's texts, at
    ``status``."""
    row = entry(code)
    return error_response(
        status, code, row.title, message, row.action, retryable=row.retryable, detail=detail
    )


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(PipelineError)
    async def _catalog(_: Request, exc: PipelineError) -> JSONResponse:
        return catalog_response(exc)

    @app.exception_handler(WrongState)
    async def _wrong_state(_: Request, exc: WrongState) -> JSONResponse:
        return error_response(409, "wrong_state", "not possible in this state", str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        code, title, action = _HTTP_CODES[422]
        detail = jsonable_encoder(exc.errors(), custom_encoder={Exception: str})
        return error_response(422, code, title, "the request is not valid", action, detail=detail)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        code, title, action = _HTTP_CODES.get(
            exc.status_code, (f"http_{exc.status_code}", "request refused", "")
        )
        return error_response(exc.status_code, code, title, str(exc.detail), action)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in the API")
        return catalog_response(UnexpectedError(f"{type(exc).__name__}: {exc}"))
