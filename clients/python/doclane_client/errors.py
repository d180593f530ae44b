"""Every refusal of the API as an exception, carrying the catalog code and its texts.

The API answers every error with one shape, ``{"error": {"code", "title", "message", "action",
"retryable", "detail"}}``, where ``code`` is doclane's catalog code (E108, E109, E115, ...) or a
word for what the catalog does not cover (``unauthorized``, ``not_found``, ``wrong_state``,
``invalid_request``). The class is chosen by the HTTP status, which says what the caller can do
about it; the code says exactly what happened::

    DoclaneError                 code, message, title, action, retryable, detail, status
    ├── AuthError                401: no token, or a wrong one
    │   └── Forbidden            403 (E109): the token's role does not allow the request
    ├── NotFound                 404: no such job (E108), or no such result
    │   └── ResultExpired        410 (E113): the result was deleted by the retention
    ├── InvalidInput             400, 413 (E103), 415, 422 (E1xx, E305, invalid_request)
    ├── WrongState               409: not possible in the job's state (cancel a finished job),
    │                            or a retry whose resubmission was refused (E101, E305, ...)
    ├── QuotaExceeded            429 (E115): come back after ``retry_after`` seconds
    │   └── RateLimited          429 (E122): this caller's rate of requests, not a quota
    ├── Unavailable              503, 502, or no answer (code "unreachable"): retried first
    ├── ServerError              500 (E399) and other answers the client cannot place
    ├── JobFailed                a job ended failed or cancelled (its own code and message)
    └── WaitTimeout              ``wait`` ran out of time (also a ``TimeoutError``)
"""

from __future__ import annotations

import json
from typing import Any


class DoclaneError(Exception):
    """A refusal: ``code`` (catalog code or word), ``message``, and the catalog's ``title``,
    ``action`` and ``retryable``; ``status`` is the HTTP status (None when none was answered)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        title: str = "",
        action: str = "",
        retryable: bool = False,
        detail: Any = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.title = title
        self.action = action
        self.retryable = retryable
        self.detail = detail
        self.status = status
        #: Seconds the API asked the client to wait (``Retry-After``), when it said.
        self.retry_after = retry_after


class AuthError(DoclaneError):
    """No bearer token, or one the API does not know (401)."""


class Forbidden(AuthError):
    """The token is known but its role does not allow the request (403, E109)."""


class NotFound(DoclaneError):
    """No such job (E108), or the job has no such result (yet)."""


class ResultExpired(NotFound):
    """The result existed and was deleted for good (410, E113)."""


class InvalidInput(DoclaneError):
    """The request itself is wrong: a source refused, an unknown format, too large a file."""


class WrongState(DoclaneError):
    """Not possible in the job's state (409), e.g. cancelling a job that has ended; or a
    retry that did not happen because its resubmission was refused (``code`` says why: E101
    the source is gone, E305 no configured server can serve it; ``detail["retry_of"]``)."""


class QuotaExceeded(DoclaneError):
    """Too many requests or jobs for now (429; E115 a tenant's queue is full): the client
    waited ``Retry-After`` and tried again as many times as its retries allow; ``retry_after``
    is the API's last word (None when it said none)."""


class RateLimited(QuotaExceeded):
    """Too many requests from this caller (429, E122: DOCLANE_API_RATE_LIMIT), told from a
    tenant's queue quota (E115) by its code; waited for and retried as a quota is."""


class Unavailable(DoclaneError):
    """The API, or what it stands on, did not answer for now (503, 502, no connection); the
    client has already retried it with backoff."""


class ServerError(DoclaneError):
    """The API failed in a way the client cannot place (500: a bug, E399)."""


class JobFailed(DoclaneError):
    """A job ended without results: failed (its error code and message) or cancelled."""

    def __init__(self, job_id: str, state: str, code: str | None, message: str | None) -> None:
        super().__init__(code or state, message or f"the job is {state}", status=None)
        self.job_id = job_id
        self.state = state


class WaitTimeout(DoclaneError, TimeoutError):
    """``wait`` reached its timeout with jobs still unfinished (``pending``, their ids)."""

    def __init__(self, pending: list[str], timeout: float) -> None:
        super().__init__(
            "timeout", f"{len(pending)} job(s) not finished after {timeout:g} s", retryable=True
        )
        self.pending = pending


_BY_STATUS: dict[int, type[DoclaneError]] = {
    400: InvalidInput,
    401: AuthError,
    403: Forbidden,
    404: NotFound,
    409: WrongState,
    410: ResultExpired,
    413: InvalidInput,
    415: InvalidInput,
    422: InvalidInput,
    429: QuotaExceeded,
    500: ServerError,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def error_for(status: int, body: bytes, retry_after: float | None = None) -> DoclaneError:
    """The exception for an error answer: its class from ``status``, its texts from the body's
    ``error`` (or, for a body not in the API's shape, from the status and the raw text)."""
    fields = _error_fields(body)
    code = str(fields.get("code") or f"http_{status}")
    message = str(fields.get("message") or body[:500].decode("utf-8", "replace") or "no body")
    kw: dict[str, Any] = {
        "title": str(fields.get("title") or ""),
        "action": str(fields.get("action") or ""),
        "retryable": bool(fields.get("retryable", status in (429, 502, 503, 504))),
        "detail": fields.get("detail"),
        "status": status,
        "retry_after": retry_after,
    }
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else InvalidInput)
    if status == 429 and code == "E122":
        cls = RateLimited
    return cls(code, message, **kw)


def _error_fields(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error if isinstance(error, dict) else {}
