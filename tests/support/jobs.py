"""Jobs made straight in the store, in the states a test needs."""

from __future__ import annotations

from pipeline.jobs.model import Job
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job


def succeeded_job(store: JobStore, *, engine: str | None = None, **overrides: object) -> Job:
    """A succeeded job; its results name ``engine`` as a worker's closing note makes them."""
    job_id = store.submissions.create(new_job(**overrides), dedup=False).job_id
    claimed = store.attempts.claim(job_id, "worker-a", lease_s=60)
    assert claimed is not None
    note = {"note": "converted", "engine": engine} if engine else None
    results = {f: "# done" for f in claimed.formats}
    assert store.attempts.finish(job_id, claimed.attempt, results, note=note)
    job = store.reads.get_job(job_id)
    assert job is not None
    return job
