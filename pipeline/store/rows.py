"""How domain values become column values, and rows become domain values, for the store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from errors import PipelineError
from pipeline.jobs.model import JobState, NewJob

#: Column types of ``copy_jobs``, in its column order (binary COPY needs them spelled out).
COPY_JOB_TYPES = [
    *("uuid", "text", "text", "text"),  # id, source kind, shown uri, fetch uri
    *("int8", "text", "text"),  # size, sha256, profile
    *("jsonb", "text[]", "text", "int2", "int4"),  # options, formats, queue, priority, max
    *("text", "uuid", "jsonb"),  # webhook url, submission id, trace context
    "text",  # tenant
]

_json_dumps = partial(json.dumps, default=str, separators=(",", ":"))

#: What dedup compares: content hash, profile, options (canonical JSON), formats and tenant (a
#: tenant is never answered with another tenant's job: it could not read it).
DedupKey = tuple[str, str, str, tuple[str, ...], str]


def counts_by_state(rows: list[dict[str, Any]], states: list[JobState]) -> dict[JobState, int]:
    counts = dict.fromkeys(states, 0)
    counts.update({JobState(row["state"]): row["jobs"] for row in rows})
    return counts


def dedup_key(spec: NewJob) -> DedupKey:
    return (
        spec.content_sha256 or "",
        spec.profile,
        canonical_json(spec.options),
        spec.formats,
        spec.tenant,
    )


def canonical_json(options: Mapping[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)


def copy_row(job_id: UUID, spec: NewJob) -> tuple[Any, ...]:
    return (
        job_id,
        spec.source_kind.value,
        spec.source_uri,
        spec.source_fetch_uri,
        spec.size_bytes,
        spec.content_sha256,
        spec.profile,
        Jsonb(spec.options, dumps=_json_dumps),
        list(spec.formats),
        spec.queue,
        spec.priority,
        spec.max_attempts,
        spec.webhook_url,
        spec.submission_id,
        jsonb(spec.trace_context),
        spec.tenant,
    )


def jsonb(value: Mapping[str, Any] | None) -> Jsonb | None:
    return None if value is None else Jsonb(dict(value), dumps=_json_dumps)


def error_columns(error: PipelineError) -> dict[str, Any]:
    """A catalog error as the job row keeps it: code, message, and what the wire said."""
    wire = {
        key: value
        for key, value in error.to_dict().items()
        if key in ("jsonrpc_code", "http_status", "retry_after", "detail")
    }
    return {
        "error_code": error.code,
        "error_message": error.message,
        "error_detail": jsonb(wire) if wire else None,
    }


@dataclass(frozen=True, slots=True)
class CallEvent:
    """One MCP call for the job's trail, written later with the attempt's next write."""

    tool: str
    duration_s: float
    outcome: str
    error_code: str | None = None
    origin: str | None = None
    detail: Mapping[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """One element of the array ``insert_mcp_calls`` (migration 0009) reads."""
        return {
            "tool": self.tool,
            "duration_ms": max(self.duration_s, 0.0) * 1000.0,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "origin": self.origin,
            "detail": None if self.detail is None else dict(self.detail),
        }


def calls_json(calls: Sequence[CallEvent]) -> Jsonb | None:
    """The trail's calls as the one JSON array parameter the store's functions take."""
    if not calls:
        return None
    return Jsonb([call.as_json() for call in calls], dumps=_json_dumps)


@dataclass(frozen=True)
class AttemptResults:
    """One attempt's successful end, as :meth:`Attempts.finish` takes it: what a round stores
    together with the others (:meth:`Attempts.finish_together`)."""

    job_id: UUID
    attempt: int
    results: Mapping[str, str]
    calls: Sequence[CallEvent] = ()
    note: Mapping[str, Any] | None = None
    origin: str | None = None

    def params(self) -> dict[str, Any]:
        """The parameters of ``finish_attempt`` (results small enough to be parameters)."""
        return {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "formats": list(self.results),
            "contents": list(self.results.values()),
            "calls": calls_json(self.calls),
            "note": jsonb(self.note),
            "origin": self.origin,
        }


def round_params(ends: Sequence[AttemptResults]) -> dict[str, Any]:
    """The parameters of ``finish_attempts`` (migration 0025): the attempts side by side, their
    results flattened, each naming its attempt by place (1-based)."""
    of: list[int] = []
    formats: list[str] = []
    contents: list[str] = []
    for n, end in enumerate(ends, 1):
        for name, content in end.results.items():
            of.append(n)
            formats.append(name)
            contents.append(content)
    return {
        "job_ids": [end.job_id for end in ends],
        "attempts": [end.attempt for end in ends],
        "origins": [end.origin for end in ends],
        "calls": [calls_json(end.calls) for end in ends],
        "notes": [jsonb(end.note) for end in ends],
        "result_of": of,
        "formats": formats,
        "contents": contents,
    }
