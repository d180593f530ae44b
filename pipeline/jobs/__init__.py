"""Jobs as values, the ground floor every part may stand on: what a submitter asks for and
what the store keeps (:mod:`.model`), a job's output formats (:mod:`.formats`) and
conversion options (:mod:`.options`), and a submission as asked (:mod:`.request`), each
re-exported here.

Nothing here imports another part of doclane but the queues and the errors: submitting
(``pipeline.submission``) and reconciling (``pipeline.reconciler``) stand above the store,
which stands on these values.
"""

from __future__ import annotations

from pipeline.jobs.formats import DEFAULT_FORMATS, FORMATS_PATTERN, KNOWN_FORMATS, Format, Formats
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
)
from pipeline.jobs.options import ConversionOptions
from pipeline.jobs.request import SubmissionRequest
from pipeline.jobs.tenants import (
    DEFAULT_TENANT,
    EVERY_TENANT,
    TENANT_PATTERN,
    WEIGHT_MAX,
    WEIGHT_MIN,
    Tenant,
    TenantFigures,
    TenantScope,
    check_tenant_name,
    scope_of,
)

__all__ = [
    "DEFAULT_FORMATS",
    "DEFAULT_TENANT",
    "EVERY_TENANT",
    "FORMATS_PATTERN",
    "KNOWN_FORMATS",
    "LEGAL_TRANSITIONS",
    "TENANT_PATTERN",
    "TERMINAL_STATES",
    "WEIGHT_MAX",
    "WEIGHT_MIN",
    "Cancellation",
    "ConversionOptions",
    "CreatedJob",
    "EventKind",
    "ExpiredLeases",
    "Format",
    "Formats",
    "Job",
    "JobEvent",
    "JobState",
    "NewJob",
    "ResultInfo",
    "SourceKind",
    "Stage",
    "SubmissionRequest",
    "Tenant",
    "TenantFigures",
    "TenantScope",
    "check_tenant_name",
    "scope_of",
]
