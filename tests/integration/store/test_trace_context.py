"""A job's trace context is stored with it (migration 0018) and outlives every turn the job
takes: each claim returns it (a retry's, a message the reconciler republished), a slice gets
its parent's from the database, and a job submitted without one has none."""

from __future__ import annotations

from errors import ServerUnavailable
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job

CONTEXT = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=x",
}


def test_every_claim_returns_the_trace_context_the_job_was_submitted_with(
    store: JobStore,
) -> None:
    job_id = store.submissions.create(new_job(trace_context=CONTEXT), dedup=False).job_id
    first = store.attempts.claim(job_id, "worker-a", lease_s=60)
    assert first is not None and first.trace_context == CONTEXT
    error = ServerUnavailable("HTTP 503", http_status=503)
    store.attempts.schedule_retry(job_id, first.attempt, error, delay=0)
    retried = store.attempts.claim(job_id, "worker-b", lease_s=60)
    assert retried is not None and retried.attempt == 2
    assert retried.trace_context == CONTEXT  # the retry continues the same trace


def test_slices_carry_their_parents_trace_context(store: JobStore) -> None:
    made = store.submissions.create(
        new_job(trace_context=CONTEXT, slices=("1-2", "3")), dedup=False
    )
    assert len(made.slice_ids) == 2
    for slice_id in made.slice_ids:
        piece = store.reads.get_job(slice_id)
        assert piece is not None and piece.trace_context == CONTEXT


def test_a_job_submitted_without_tracing_has_no_trace_context(store: JobStore) -> None:
    made = store.submissions.create(new_job(slices=("1", "2")), dedup=False)
    for job_id in (made.job_id, *made.slice_ids):
        stored = store.reads.get_job(job_id)
        assert stored is not None and stored.trace_context is None
