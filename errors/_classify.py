"""The one classification function: anything that went wrong -> a catalog error.

Retry (its ``giveup``), the circuit breaker (its ``exclude``), the Celery task and the CLI all
ask this function and read the flags of what it returns, so there is exactly one answer to
"is this worth another try?" and "is the server sick?".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from errors._catalog import JSONRPC_CODES
from errors._tree import (
    CallTimeout,
    ConversionFailed,
    ExportFailed,
    InvalidRequest,
    PipelineError,
    ServerUnavailable,
    SessionExpired,
    Unauthorized,
    UnexpectedError,
    error_for,
)

#: Which step a tool result came from; an ``isError`` result means E306 or E307 by step.
Stage = Literal["convert", "export"]

_MAX_TEXT = 2000


def classify(problem: object, *, stage: Stage = "convert") -> PipelineError:
    """Return the catalog error for ``problem``.

    ``problem`` may be:

    - a :class:`PipelineError` (returned unchanged);
    - a JSON-RPC error object ``{"code": -32602, "message": ..., "data": ...}``, or a whole
      response that carries one under ``"error"``;
    - an MCP tool result with ``isError: true`` (E306 for ``stage="convert"``, E307 for export);
    - an HTTP status code (an ``int`` from 100 to 599);
    - any other exception: built-in timeouts become E303, connection errors E302, the rest E399.

    It never raises and never returns ``None``: an unknown thing is E399, explained.
    """
    if isinstance(problem, PipelineError):
        return problem
    if isinstance(problem, bool):
        return UnexpectedError(f"cannot classify {problem!r}")
    if isinstance(problem, int):
        return _from_http_status(problem)
    if isinstance(problem, Mapping):
        return _from_mapping(problem, stage)
    if isinstance(problem, TimeoutError):
        return CallTimeout(str(problem) or "timed out")
    if isinstance(problem, ConnectionError):
        return ServerUnavailable(str(problem) or type(problem).__name__)
    if isinstance(problem, BaseException):
        return UnexpectedError(
            f"{type(problem).__name__}: {problem}"[:_MAX_TEXT],
            detail={"exception": type(problem).__qualname__},
        )
    return UnexpectedError(f"cannot classify {type(problem).__name__}")


def classify_jsonrpc(code: int, message: str = "", data: Any = None) -> PipelineError:
    """The catalog error for a JSON-RPC error code; unknown codes are E299 with the code kept."""
    catalog_code = JSONRPC_CODES.get(code, "E299")
    text = message or f"JSON-RPC error {code}"
    return error_for(catalog_code, text[:_MAX_TEXT], jsonrpc_code=code, detail=_small(data))


def _from_http_status(status: int, text: str = "") -> PipelineError:
    if not 100 <= status <= 599:
        return UnexpectedError(f"not an HTTP status: {status}")
    suffix = f": {text}" if text else ""
    if status in (401, 403):
        return Unauthorized(f"HTTP {status}{suffix}", http_status=status)
    if status == 404:
        return SessionExpired(f"HTTP 404, session not found{suffix}", http_status=status)
    if status == 408:
        return CallTimeout(f"HTTP 408{suffix}", http_status=status)
    if status == 429 or status >= 500:
        return ServerUnavailable(f"HTTP {status}{suffix}", http_status=status)
    return InvalidRequest(f"HTTP {status}{suffix}", http_status=status)


def _from_mapping(obj: Mapping[str, Any], stage: Stage) -> PipelineError:
    if obj.get("isError") is True:
        text = _tool_text(obj)
        cls = ExportFailed if stage == "export" else ConversionFailed
        return cls(text or "tool reported an error", detail={"tool_text": text} if text else None)
    nested = obj.get("error")
    error: Mapping[str, Any] = nested if isinstance(nested, Mapping) else obj
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return classify_jsonrpc(code, str(error.get("message", "")), error.get("data"))
    status = obj.get("http_status")
    if isinstance(status, int) and not isinstance(status, bool):
        return _from_http_status(status, str(obj.get("text", ""))[:200])
    return UnexpectedError("unrecognised error object", detail=_small(dict(obj)))


def _tool_text(result: Mapping[str, Any]) -> str:
    parts = []
    for block in result.get("content") or []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)[:_MAX_TEXT]


def _small(value: Any) -> Any:
    """Keep wire data that is useful in a job row without storing a megabyte of it."""
    if value is None:
        return None
    text = repr(value)
    return value if len(text) <= _MAX_TEXT else text[:_MAX_TEXT]
