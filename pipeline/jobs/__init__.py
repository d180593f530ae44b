"""Jobs: what a submitter asks for and what the store keeps (:mod:`.model`, re-exported here),
and the flow of a job outside the worker that runs it: submitting (:mod:`.submit`), publishing
its wake-up call (:mod:`.publishing`), and reconciling the broker with PostgreSQL
(:mod:`.reconcile`).

Importing ``pipeline.jobs`` loads the values only; the flow's modules are imported by name, so
the job store (which needs the values) never pulls in the submitter (which needs the store).
"""

from __future__ import annotations

from pipeline.jobs.model import (
    LEGAL_TRANSITIONS,
    TERMINAL_STATES,
    Cancellation,
    CreatedJob,
    EventKind,
    ExpiredLeases,
    Job,
    JobEvent,
    JobState,
    NewJob,
    ResultInfo,
    SourceKind,
    Stage,
    normalize_formats,
)

__all__ = [
    "LEGAL_TRANSITIONS",
    "TERMINAL_STATES",
    "Cancellation",
    "CreatedJob",
    "EventKind",
    "ExpiredLeases",
    "Job",
    "JobEvent",
    "JobState",
    "NewJob",
    "ResultInfo",
    "SourceKind",
    "Stage",
    "normalize_formats",
]
