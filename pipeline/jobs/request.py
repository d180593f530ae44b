"""A submission as its submitter asked for it, parsed: the one value every door hands on.

The CLI's arguments, the API's body and upload form and the console's upload are each parsed
at their door into a :class:`SubmissionRequest` (its formats a :class:`~.formats.Formats`, its
options :class:`~.options.ConversionOptions`); ``pipeline.submission.intake.enqueue`` takes it as it
is. What only the operator's settings can decide (whether a webhook's address is allowed, which
servers are configured) is decided there, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.jobs.formats import DEFAULT_FORMATS, Formats
from pipeline.jobs.options import ConversionOptions


@dataclass(frozen=True, slots=True)
class SubmissionRequest:
    """Sources to convert, to which formats, how, and who is told when each job ends."""

    #: Files, folders, globs, URLs and ``s3://`` keys, as given (``pipeline.sources`` checks each).
    sources: Sequence[str | Path]
    formats: Formats = DEFAULT_FORMATS
    options: ConversionOptions = field(default_factory=ConversionOptions)
    #: Higher runs first; what reaches the broker is its level (``queues.clamp_priority``).
    priority: int = 0
    #: False: convert again even if the same content already succeeded.
    dedup: bool = True
    #: Told when each new job ends (default ``DOCLANE_WEBHOOK_URL``).
    webhook_url: str | None = None
    #: Whose jobs these are (``doclane tenants``): it must exist, and its ``max_queued`` bounds
    #: how many are queued. A caller that speaks for a tenant (an API token with one) sets it.
    tenant: str = "default"
