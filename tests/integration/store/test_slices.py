"""A document split into slices: the database finishes the waiting job from its slices (0017)."""

from __future__ import annotations

import json
import threading
from uuid import UUID

import psycopg
import pytest

from errors import ConversionFailed, ServerUnavailable
from pipeline.jobs.model import Job, JobState
from pipeline.store.finishing import INLINE_RESULTS_MAX_CHARS
from pipeline.store.store import JobStore
from tests.fixtures.waiting import wait_for
from tests.support.store_builders import new_job, someone_waits_for_a_lock

RUNS = ("1-2", "3-4", "5")


def split(store: JobStore, formats: tuple[str, ...] = ("md",)) -> tuple[UUID, list[UUID]]:
    made = store.submissions.create(new_job(formats=formats, slices=RUNS), dedup=False)
    return made.job_id, list(made.slice_ids)


def job(store: JobStore, job_id: UUID) -> Job:
    found = store.reads.get_job(job_id)
    assert found is not None
    return found


def convert(store: JobStore, slice_id: UUID, results: dict[str, str]) -> bool:
    claimed = store.attempts.claim(slice_id, "worker-a", lease_s=60)
    assert claimed is not None
    return store.attempts.finish(slice_id, claimed.attempt, results)


def test_a_split_job_waits_and_its_slices_are_queued_with_their_page_runs(
    store: JobStore,
) -> None:
    parent_id, slice_ids = split(store)
    parent = job(store, parent_id)
    assert (parent.state, parent.slices_total, parent.slices_done) == (JobState.WAITING, 3, 0)
    slices = [job(store, s) for s in slice_ids]
    assert [s.options["pages"] for s in slices] == list(RUNS)
    assert {(s.state, s.parent_id) for s in slices} == {(JobState.QUEUED, parent_id)}
    assert store.attempts.claim(parent_id, "worker-a", lease_s=60) is None  # no worker converts it


def test_the_last_slice_joins_the_results_in_page_order_whatever_order_they_finish_in(
    store: JobStore,
) -> None:
    parent_id, (first, second, third) = split(store, ("chunks", "md", "text"))
    texts = {first: "page one", second: "page three", third: "page five"}
    for n, slice_id in enumerate((third, first, second)):
        chunks = json.dumps({"hierarchical": [{"text": texts[slice_id]}], "flat": []})
        results = {"md": f"# {texts[slice_id]}", "text": texts[slice_id], "chunks": chunks}
        assert convert(store, slice_id, results)
        assert job(store, parent_id).slices_done == n + 1
    parent = job(store, parent_id)
    assert parent.state is JobState.SUCCEEDED
    assert store.reads.get_result(parent_id, "md") == "# page one\n\n# page three\n\n# page five"
    assert store.reads.get_result(parent_id, "text") == "page one\n\npage three\n\npage five"
    chunks = json.loads(store.reads.get_result(parent_id, "chunks") or "")
    assert [c["text"] for c in chunks["hierarchical"]] == ["page one", "page three", "page five"]
    assert chunks["flat"] == []


def test_two_slices_finishing_at_once_assemble_exactly_once(
    store: JobStore, migrated_database_url: str
) -> None:
    parent_id, (first, second, third) = split(store)
    assert convert(store, first, {"md": "one"})
    held = store.attempts.claim(second, "worker-a", lease_s=60)
    other = store.attempts.claim(third, "worker-b", lease_s=60)
    assert held is not None and other is not None
    with psycopg.connect(migrated_database_url) as conn:
        # The slice's end counted now, not at commit: this transaction holds the parent's row.
        conn.execute("SET CONSTRAINTS jobs_slice_finished IMMEDIATE")
        conn.execute(
            "SELECT finish_attempt(%s, %s, '{md}', '{two}', '[]'::jsonb, NULL)",
            (second, held.attempt),
        )
        finished = threading.Event()
        racing = threading.Thread(
            target=lambda: (convert_claimed(store, other), finished.set()), daemon=True
        )
        racing.start()
        wait_for(lambda: parent_locked(migrated_database_url), timeout=10)
        assert not finished.is_set()
        conn.commit()
    racing.join(timeout=10)
    assert finished.is_set()
    parent = job(store, parent_id)
    assert (parent.state, parent.slices_done) == (JobState.SUCCEEDED, 3)
    assert store.reads.get_result(parent_id, "md") == "one\n\ntwo\n\nthree"


def convert_claimed(store: JobStore, claimed: Job) -> None:
    assert store.attempts.finish(claimed.id, claimed.attempt, {"md": "three"})


def parent_locked(url: str) -> bool:
    """Some session waits for a row lock (the racing slice's end, on the parent)."""
    return someone_waits_for_a_lock(url)


def test_a_retried_slice_is_retried_alone_and_the_job_still_completes(store: JobStore) -> None:
    parent_id, (first, second, third) = split(store)
    claimed = store.attempts.claim(second, "worker-a", lease_s=60)
    assert claimed is not None
    assert store.attempts.schedule_retry(
        second, claimed.attempt, ServerUnavailable("503"), delay=0.0
    ) is (JobState.RETRYING)
    assert job(store, parent_id).state is JobState.WAITING
    assert {job(store, s).state for s in (first, third)} == {JobState.QUEUED}
    for slice_id, text in ((first, "a"), (second, "b"), (third, "c")):
        assert convert(store, slice_id, {"md": text})
    assert job(store, second).attempt == 2
    assert store.reads.get_result(parent_id, "md") == "a\n\nb\n\nc"


def test_a_slice_that_fails_for_good_fails_the_job_with_its_code_and_cancels_the_rest(
    store: JobStore,
) -> None:
    parent_id, (first, second, third) = split(store)
    assert convert(store, first, {"md": "a"})
    running = store.attempts.claim(third, "worker-b", lease_s=60)
    claimed = store.attempts.claim(second, "worker-a", lease_s=60)
    assert claimed is not None and running is not None
    assert store.attempts.fail(second, claimed.attempt, ConversionFailed("page 3 is broken"))
    parent = job(store, parent_id)
    assert parent.state is JobState.FAILED
    assert parent.error_code == ConversionFailed.code
    assert parent.error_message is not None and parent.error_message.startswith("pages 3-4: ")
    assert parent.error_detail is not None and parent.error_detail["slice"] == str(second)
    assert job(store, third).state is JobState.CANCELLED
    assert not store.attempts.finish(
        third, running.attempt, {"md": "c"}
    )  # its late end writes nothing
    assert store.reads.list_results(parent_id) == []


@pytest.mark.parametrize("running_slices", [0, 2])
def test_cancelling_the_job_cancels_its_unfinished_slices(
    store: JobStore, running_slices: int
) -> None:
    parent_id, slice_ids = split(store)
    assert convert(store, slice_ids[0], {"md": "a"})
    claims = [
        store.attempts.claim(s, "worker-a", lease_s=60) for s in slice_ids[1 : 1 + running_slices]
    ]
    cancelled = store.operations.cancel(parent_id)
    assert cancelled is not None and cancelled.previous_state is JobState.WAITING
    states = [job(store, s).state for s in slice_ids]
    assert states == [JobState.SUCCEEDED, JobState.CANCELLED, JobState.CANCELLED]
    for claimed in claims:
        assert claimed is not None and not store.attempts.finish(
            claimed.id, claimed.attempt, {"md": "x"}
        )
    assert job(store, parent_id).state is JobState.CANCELLED


def test_cancelling_one_slice_cancels_the_job(store: JobStore) -> None:
    parent_id, slice_ids = split(store)
    assert store.operations.cancel(slice_ids[1]) is not None
    assert job(store, parent_id).state is JobState.CANCELLED
    assert {job(store, s).state for s in slice_ids} == {JobState.CANCELLED}


def test_a_slice_whose_results_go_by_copy_is_assembled_with_them(store: JobStore) -> None:
    """Large results are stored by COPY after the state change: the assembly, at commit, sees
    them."""
    parent_id, (first, second, third) = split(store)
    large = "x" * (INLINE_RESULTS_MAX_CHARS + 1)
    assert convert(store, first, {"md": "a"})
    assert convert(store, third, {"md": "c"})
    assert convert(store, second, {"md": large})
    assert store.reads.get_result(parent_id, "md") == f"a\n\n{large}\n\nc"


def test_cancel_waits_for_a_slice_being_stored_instead_of_deadlocking(
    store: JobStore, migrated_database_url: str
) -> None:
    """A slice's finishing transaction holds its slice, then locks the job at commit; cancel
    takes the slices first, so neither is aborted as a deadlock."""
    parent_id, (first, second, _third) = split(store)
    held = store.attempts.claim(first, "worker-a", lease_s=60)
    assert held is not None
    outcome: list[object] = []
    with psycopg.connect(migrated_database_url) as conn:
        conn.execute(
            "SELECT finish_attempt(%s, %s, '{md}', '{one}', '[]'::jsonb, NULL)",
            (first, held.attempt),
        )
        cancelling = threading.Thread(
            target=lambda: outcome.append(store.operations.cancel(parent_id))
        )
        cancelling.start()
        wait_for(lambda: parent_locked(migrated_database_url), timeout=10)
        conn.commit()  # the slice's end locks the job now: cancel must not hold it
    cancelling.join(timeout=10)
    assert outcome and outcome[0] is not None
    assert job(store, first).state is JobState.SUCCEEDED
    assert job(store, second).state is JobState.CANCELLED
    assert job(store, parent_id).state is JobState.CANCELLED
