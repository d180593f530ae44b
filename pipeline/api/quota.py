"""``Retry-After`` of a submission refused whole for its tenant's queue quota (429, E115).

The tenant's queue drains as fast as its jobs finish (a job leaves the queue when a worker
claims it, and over a few minutes a tenant's claims and ends run at the same rate), so the wait
is the time its recent rate takes to free room for the refused documents:

    rate  = the tenant's jobs finished in the last 5 minutes / 300 s
    need  = the documents refused, at most the quota (more never fit at once)
    wait  = ceil(need / rate), clamped to 1 .. 600 seconds

A tenant that finished nothing in the window (paused, or its workers busy elsewhere) gets
60 seconds: no rate says when it resumes, and a minute is a polite interval to ask again.
"""

from __future__ import annotations

import math

from pipeline.store.store import JobStore

#: The window the finishing rate is measured over, in seconds.
RATE_WINDOW_S = 300.0
#: Bounds of the answer, in seconds.
RETRY_AFTER_MIN_S, RETRY_AFTER_MAX_S = 1, 600
#: The answer when the tenant finished nothing in the window.
RETRY_AFTER_IDLE_S = 60


def quota_retry_after(store: JobStore, tenant: str, refused: int) -> int:
    """Seconds until ``tenant``'s queue has room for ``refused`` documents, by its recent
    finishing rate (see the module's docstring)."""
    finished = store.tenants.finished_since(tenant, RATE_WINDOW_S)
    if finished <= 0:
        return RETRY_AFTER_IDLE_S
    found = store.tenants.get(tenant)
    quota = found.max_queued if found is not None and found.max_queued else refused
    need = max(1, min(refused, quota))
    seconds = math.ceil(need / (finished / RATE_WINDOW_S))
    return max(RETRY_AFTER_MIN_S, min(RETRY_AFTER_MAX_S, seconds))
