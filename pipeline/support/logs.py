"""Job-aware logging: every line about a job says which job, which attempt, which server.

The processor sets the job's context (a contextvar, so threads and nested calls see the right
job without passing it around); a filter copies it onto every record, whoever logs it (our code,
httpx, Celery). A second filter masks secrets (passwords in URLs, bearer tokens, API keys) in
the final message with the process's masker (:mod:`pipeline.support.secrets`), so a broker URL
or an auth header that slips into an exception text never reaches a log shipper.
``DOCLANE_LOG_FORMAT=json`` writes one JSON object per line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Literal

from pydantic import AliasChoices, Field

from pipeline.support.secrets import Masker, process_masker
from pipeline.support.settings import Section

LogFormat = Literal["text", "json"]


@dataclass(slots=True)
class JobLogContext:
    """Mutable on purpose: what the processor learns (attempt, origin) stays on the context that
    Celery's task signals opened, so Celery's own closing line about the task carries it too."""

    job_id: str
    attempt: int | None = None
    origin: str | None = None


_current: ContextVar[JobLogContext | None] = ContextVar("doclane_job", default=None)


@contextlib.contextmanager
def job_context(job_id: str, attempt: int | None = None) -> Iterator[None]:
    """Every log record inside the block carries ``job_id`` (and attempt/origin once known).

    Inside a context already opened for the same job (Celery's task signals), that one is used.
    """
    outer = _current.get()
    if outer is not None and outer.job_id == job_id:
        if attempt is not None:
            outer.attempt = attempt
        yield
        return
    token = _current.set(JobLogContext(job_id, attempt))
    try:
        yield
    finally:
        _current.reset(token)


def enter_job_context(job_id: str, attempt: int | None = None) -> Token[JobLogContext | None]:
    """For callers whose start and end are separate callbacks (Celery's task signals)."""
    return _current.set(JobLogContext(job_id, attempt))


def leave_job_context(token: Token[JobLogContext | None]) -> None:
    _current.reset(token)


def update_job_context(*, attempt: int | None = None, origin: str | None = None) -> None:
    """Fill in what is learned during the job: the attempt at claim, the origin at dispatch."""
    ctx = _current.get()
    if ctx is None:
        return
    if attempt is not None:
        ctx.attempt = attempt
    if origin is not None:
        ctx.origin = origin


def current_job_context() -> JobLogContext | None:
    return _current.get()


class JobContextFilter(logging.Filter):
    """Puts ``job_id``, ``attempt`` and ``origin`` on every record ("-" outside a job)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = _current.get()
        if not hasattr(record, "job_id"):
            record.job_id = ctx.job_id if ctx else "-"
        if not hasattr(record, "attempt"):
            record.attempt = ctx.attempt if ctx and ctx.attempt is not None else "-"
        if not hasattr(record, "origin"):
            record.origin = ctx.origin if ctx and ctx.origin else "-"
        return True


class SecretRedactingFilter(logging.Filter):
    """Renders the message once, masks secrets in it and in the traceback text."""

    def __init__(self, masker: Masker) -> None:
        super().__init__()
        self.masker = masker

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.masker.text(message)
        if cleaned != message or record.args:
            record.msg = cleaned
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.masker.text(record.exc_text)
        return True


TEXT_FORMAT = (
    "%(asctime)s %(levelname)s %(processName)s %(name)s "
    "[job=%(job_id)s attempt=%(attempt)s origin=%(origin)s%(trace)s] %(message)s"
)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line, with the job fields at the top level for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
            "message": record.getMessage(),
            "job_id": getattr(record, "job_id", "-"),
            "attempt": getattr(record, "attempt", "-"),
            "origin": getattr(record, "origin", "-"),
            "trace_id": getattr(record, "trace_id", "-"),
            "span_id": getattr(record, "span_id", "-"),
        }
        if record.exc_info or record.exc_text:
            out["exception"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(out, ensure_ascii=False, default=str)


class LogSettings(Section):
    #: ``text`` for people, ``json`` (one object per line with job_id, attempt and origin)
    #: for log shippers.
    format: LogFormat = Field("text", validation_alias=AliasChoices("DOCLANE_LOG_FORMAT", "format"))
    #: The root logger's level: DEBUG, INFO, WARNING or ERROR.
    level: str = Field("INFO", validation_alias=AliasChoices("DOCLANE_LOG_LEVEL", "level"))


#: Where a line's trace and span ids come from: ``pipeline.support.tracing`` sets it when
#: tracing is on (this module cannot import tracing, which reads this module's job context).
_trace_ids_source: list[Callable[[], tuple[str, str] | None]] = []


def use_trace_ids(source: Callable[[], tuple[str, str] | None]) -> None:
    """Take each log line's trace and span ids from ``source`` (None: outside a span)."""
    _trace_ids_source[:] = [source]


class TraceIdsFilter(logging.Filter):
    """Puts ``trace_id`` and ``span_id`` on every record ("-" outside a span or with tracing
    off), and ``trace``: " trace=... span=..." for the text format, empty when there is no span
    (a line without tracing reads as it always did)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "trace_id"):
            ids = _trace_ids_source[0]() if _trace_ids_source else None
            trace_id, span_id = ids or ("-", "-")
            record.trace_id = trace_id
            record.span_id = span_id
            record.trace = f" trace={trace_id} span={span_id}" if trace_id != "-" else ""
        return True


def configure_logging(
    settings: LogSettings,
    stream: IO[str] | None = None,
    *,
    first_filters: Sequence[logging.Filter] = (),
    masker: Masker | None = None,
) -> logging.Handler:
    """Install one handler on the root logger with the job and secret filters.

    ``masker`` masks secrets in every line (by default the process's, ``process_masker()``).

    ``first_filters`` run before the job filter: they may name the job of a record logged
    outside any job context (Celery's main process logs tasks it received that way).
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    for extra in first_filters:
        handler.addFilter(extra)
    handler.addFilter(JobContextFilter())
    handler.addFilter(TraceIdsFilter())
    handler.addFilter(SecretRedactingFilter(masker or process_masker()))
    if settings.format == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(settings.level.upper())
    # httpx logs every request at INFO; that is noise at fleet scale.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    return handler
