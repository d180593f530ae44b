"""Submitting documents: sources in, one job id (or one refusal with its E1xx code) per source out.

::

    from pipeline.enqueue import enqueue
    submission = enqueue(["inbox/", "https://example.org/a.docx"], formats=("md", "json"),
                         store=store, publisher=publisher)
    for item in submission.accepted: print(item.job_id, item.queue)
    for item in submission.rejected: print(item.source, item.code, item.message)

Each source is validated before it becomes a job (``pipeline.sources``); a refusal never stops
the others. Rows are committed, all in one transaction, *before* any message is published: a
worker can never receive an id the database does not know, and a publish that fails leaves a
queued row that the reconciler publishes later. Queues follow the size tier, so one huge
document does not hold up a thousand small ones; a URL (size unknown until fetched) goes large.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.jobs import NewJob, SourceKind, normalize_formats
from pipeline.profiles import KNOWN_FORMATS
from pipeline.publishing import JobMessage, Publisher, publish_all
from pipeline.sizes import size_tier
from pipeline.sources import Candidate, SourceSettings, expand, load_source_settings
from pipeline.store import JobStore

log = logging.getLogger("doclane.enqueue")


class SubmitSettings(BaseSettings):
    """Defaults of a submission that are the operator's to set, not the submitter's."""

    model_config = SettingsConfigDict(
        env_prefix="DOCLANE_", env_file=".env", extra="ignore", frozen=True, env_ignore_empty=True
    )

    #: Attempts a job may be charged (an open circuit breaker does not charge one).
    max_attempts: int = Field(default=3, ge=1)
    #: The tool profile jobs ask for (``auto``: whatever fits the server); part of dedup's key.
    profile: str = "auto"


def load_submit_settings(**overrides: Any) -> SubmitSettings:
    return SubmitSettings(**overrides)


def queue_for(size_bytes: int | None) -> str:
    """``doclane.small|medium|large`` by the size tier (unknown size: large)."""
    return f"doclane.{size_tier(size_bytes)}"


@dataclass(frozen=True, slots=True)
class Accepted:
    """A source that is (or already was) a job."""

    source: str
    uri: str
    job_id: UUID
    queue: str
    deduplicated: bool = False
    #: False when the broker refused the message; the reconciler will publish it.
    published: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "uri": self.uri,
            "job_id": str(self.job_id),
            "queue": self.queue,
            "deduplicated": self.deduplicated,
            "published": self.published,
        }


@dataclass(frozen=True, slots=True)
class Refused:
    """A source that did not become a job, and why (its E1xx code)."""

    source: str
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "code": self.code, "message": self.message}


@dataclass(slots=True)
class Submission:
    accepted: list[Accepted] = field(default_factory=list)
    rejected: list[Refused] = field(default_factory=list)
    #: Files in folders and glob matches passed over (hidden, not a document type), by reason.
    skipped: dict[str, int] = field(default_factory=dict)
    #: Sources named twice (or reached twice through folders and links), listed once.
    duplicates: int = 0
    #: Jobs whose message the broker refused: queued, waiting for the reconciler.
    publish_failures: dict[UUID, str] = field(default_factory=dict)

    @property
    def job_ids(self) -> list[UUID]:
        return [item.job_id for item in self.accepted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "accepted": [item.to_dict() for item in self.accepted],
            "rejected": [item.to_dict() for item in self.rejected],
            "skipped": dict(self.skipped),
            "duplicates": self.duplicates,
            "publish_failures": {str(k): v for k, v in self.publish_failures.items()},
        }


def check_formats(formats: Iterable[str] | str) -> tuple[str, ...]:
    """Normalized formats; ``ValueError`` naming the unknown ones."""
    normalized = normalize_formats(formats)
    unknown = [fmt for fmt in normalized if fmt not in KNOWN_FORMATS]
    if unknown:
        raise ValueError(
            f"unknown output format(s): {', '.join(unknown)} "
            f"(known: {', '.join(sorted(KNOWN_FORMATS))})"
        )
    return normalized


def enqueue(
    sources: Sequence[str | Path],
    formats: Iterable[str] | str = ("md",),
    priority: int = 0,
    no_dedup: bool = False,
    *,
    publisher: Publisher,
    store: JobStore | None = None,
    source_settings: SourceSettings | None = None,
    submit_settings: SubmitSettings | None = None,
    options: dict[str, Any] | None = None,
    cwd: Path | None = None,
) -> Submission:
    """Validate ``sources``, create their jobs, commit, then publish one message per new job.

    ``store`` defaults to a short-lived one from the environment's settings. A deduplicated
    source (same content, profile, options and formats as a succeeded job) returns that job and
    publishes nothing.
    """
    wanted = check_formats(formats)
    sources_cfg = source_settings or load_source_settings()
    submit = submit_settings or load_submit_settings()
    expansion = expand([str(s) for s in sources], sources_cfg, cwd=cwd)
    submission = Submission(skipped=dict(expansion.skipped), duplicates=expansion.duplicates)
    shown = sources_cfg.shown
    submission.rejected = [
        Refused(shown(r.source), r.code, shown(r.message)) for r in expansion.rejected
    ]
    candidates = expansion.candidates
    specs = [
        _new_job(
            c, formats=wanted, priority=priority, submit=submit, options=options or {}, shown=shown
        )
        for c in candidates
    ]

    own_store = store is None
    job_store = store if store is not None else JobStore()
    try:
        created = job_store.create_many(specs, dedup=not no_dedup) if specs else []
    finally:
        if own_store:
            job_store.close()

    messages = [
        JobMessage(made.job_id, spec.queue, priority=priority)
        for spec, made in zip(specs, created, strict=True)
        if not made.deduplicated
    ]
    report = publish_all(publisher, messages)
    submission.publish_failures = report.failed
    if report.failed:
        log.warning(
            "%d job(s) stay queued for the reconciler: publish failed (first: %s)",
            len(report.failed),
            next(iter(report.failed.values())),
        )
    published = set(report.published)
    for candidate, spec, made in zip(candidates, specs, created, strict=True):
        submission.accepted.append(
            Accepted(
                source=shown(candidate.source),
                uri=spec.source_uri,
                job_id=made.job_id,
                queue=spec.queue,
                deduplicated=made.deduplicated,
                published=made.job_id in published,
            )
        )
    log.info(
        "submitted %d source(s): %d new job(s), %d deduplicated, %d refused",
        len(candidates) + len(submission.rejected),
        len(messages),
        sum(1 for a in submission.accepted if a.deduplicated),
        len(submission.rejected),
    )
    return submission


def _new_job(
    candidate: Candidate,
    *,
    formats: tuple[str, ...],
    priority: int,
    submit: SubmitSettings,
    options: dict[str, Any],
    shown: Callable[[str], str],
) -> NewJob:
    info = candidate.info
    masked = shown(info.uri) if info.kind == "url" else info.uri
    return NewJob(
        source_kind=SourceKind(info.kind),
        source_uri=masked,
        source_fetch_uri=info.uri if masked != info.uri else None,
        queue=queue_for(info.size_bytes),
        formats=formats,
        profile=submit.profile,
        options=options,
        size_bytes=info.size_bytes,
        content_sha256=info.sha256,
        priority=priority,
        max_attempts=submit.max_attempts,
    )
