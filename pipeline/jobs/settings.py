"""Settings of the job flow outside the worker: a submission's operator defaults, and the
reconciler's pace and thresholds (the ``submit`` and ``reconcile`` sections of
``pipeline.settings``).

Kept apart from the flow's modules, which load the store, the sources and the publisher: every
process reads these sections with its settings tree, and most never submit or reconcile.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from pipeline.jobs.tenants import DEFAULT_TENANT, TENANT_PATTERN
from pipeline.queues import WAKE_BELLS
from pipeline.support.settings import Section

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(value: Any) -> Any:
    """``30d`` -> 30 days; ``off``/empty -> None; anything else is left to pydantic."""
    if isinstance(value, str):
        if value.strip().lower() in ("", "off", "none"):
            return None
        match = _DURATION.match(value.lower())
        if match is None:
            raise ValueError(f"not a duration: {value!r} (say 30d, 12h, 90m, 45s or 2w)")
        return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    return value


class ReconcileSettings(Section):
    #: How often beat runs a pass: the longest a lost or flushed bell delays claimable work.
    reconcile_interval_s: float = Field(default=30.0, gt=0)
    #: Rows per sweep; a backlog larger than this is worked off over several passes.
    reconcile_batch: int = Field(default=1000, ge=1)
    #: A scratch folder or partial download younger than this is never swept.
    reconcile_scratch_min_age_s: float = Field(default=60.0, ge=0)
    #: An object under DOCLANE_RESULT_STORE's prefix that no result names is deleted once it is
    #: older than this (younger, its job's commit may still be coming).
    reconcile_orphan_min_age_s: float = Field(default=3600.0, ge=0)
    #: An upload folder in the inbox that no job names is removed once nothing in it was
    #: written for this long (younger, its submission may still be making its job).
    reconcile_upload_min_age_s: float = Field(default=3600.0, ge=0)
    #: Results older than this are deleted, a batch per pass (their jobs say "expired"):
    #: a duration such as ``30d``, ``12h``, ``90m`` (s, m, h, d, w); empty or ``off``: kept.
    result_retention: Annotated[timedelta | None, BeforeValidator(parse_duration)] = None
    #: Days an audit entry is kept (``doclane audit``); each pass deletes older ones, and the
    #: submissions' Idempotency-Keys older than a day.
    audit_retention_days: int = Field(default=400, ge=1)


class SubmitSettings(Section):
    """Defaults of a submission that are the operator's to set, not the submitter's."""

    #: Attempts a job may be charged (an open circuit breaker does not charge one).
    max_attempts: int = Field(default=3, ge=1)
    #: The tool profile jobs ask for (``auto``: whatever fits the server); part of dedup's key.
    profile: str = "auto"
    #: The engine the workers convert with, as its server names itself at initialize: a name
    #: (``docling-rs``, ``docling``: any version) or a name and version (``docling-rs 2.52.7``).
    #: Dedup then reuses only results that engine made, so that after switching servers a
    #: document submitted again is converted by the new one. Empty: any engine's results.
    dedup_engine: str = ""
    #: A PDF of more pages than this is converted as slices of this many pages, by any worker,
    #: and joined when the last is stored (md, text and chunks only). 0: never sliced. Slices
    #: use the server's ``pages`` option, which the docling-rs profile has (docling-mcp fails
    #: them with E305).
    slice_pages: int = Field(default=0, ge=0)
    #: The tenant ``doclane submit`` submits as when --tenant is not given (it must exist:
    #: ``doclane tenants set NAME``). The API ignores it: there a token's tenant decides.
    tenant: str = Field(default=DEFAULT_TENANT, pattern=TENANT_PATTERN)
    #: Bells a submission rings on each queue it filled, at most (one a job below that): a
    #: drain takes every job it may while there is work, so more bells than the fleet has idle
    #: pool processes only cost an empty claim each; fewer leave processes idle until a drain
    #: or the reconciler rings again.
    wake_bells: int = Field(default=WAKE_BELLS, ge=1)
