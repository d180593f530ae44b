"""Small documents in batches, against the fake server's directory tool and a real PostgreSQL.

The fake answers like docling-mcp 3.3.0 (document keys only, in listing order, files it cannot
convert silently skipped) and can skip chosen files or answer in reversed or shuffled order.
Every test checks that each job got its *own* document's result: the samples carry their number
in their content, and the markdown says which one it came from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from pipeline.admin.stats import batches_since
from pipeline.jobs.model import EventKind, JobState
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_sample
from tests.fixtures.waiting import wait_for
from tests.support.processing import Bench, assert_own_result, retry_bells, submit_samples

CONVERT = "convert_document_into_docling_document"
#: A message's claims stop at its first (``DOCLANE_ROUND_MAX_S`` 0): what one batch does is
#: under test, not the message's further claims (tests/integration/processing/test_processor.py).
FIRST_CLAIM_ONLY = {"round_max_s": 0}
DIRECTORY = "convert_directory_files_into_docling_document"


def batch_notes(bench: Bench, job_id: UUID) -> list[dict[str, object]]:
    return [
        e.detail
        for e in bench.store.reads.events(job_id)
        if e.kind is EventKind.NOTE and e.detail and "batch" in e.detail
    ]


@pytest.mark.parametrize("order", ["listed", "reversed", "shuffled"])
def test_a_batch_gives_every_job_its_own_result_in_any_answer_order(
    make_bench: Callable[..., Bench], order: str
) -> None:
    bench = make_bench(batches=True, processing={"batch_max_docs": 6})
    bench.server.configure(dir_order=order, dir_seed=7)
    ids = submit_samples(bench, 6, formats=("json", "md"))

    outcome = bench.take(ids[0])

    assert outcome.kind is OutcomeKind.SUCCEEDED
    stats = bench.server.stats()
    assert len(stats["directory_calls"]) == 1
    assert stats["requests_by_tool"].get(CONVERT, 0) == 0, "nothing converted one by one"
    for number, job_id in enumerate(ids, start=1):
        job = bench.store.reads.get_job(job_id)
        assert job is not None and job.state is JobState.SUCCEEDED and job.attempt == 1
        assert_own_result(bench, job_id, number)
        assert Path(job.source_uri).name in (bench.store.reads.get_result(job_id, "json") or "")
        [note] = batch_notes(bench, job_id)
        assert note["size"] == 6 and note["place"] == number - 1
        # the engine as the fake names itself at initialize, as a lone job's results name it
        assert {r.engine for r in bench.store.reads.list_results(job_id)} == {"docling"}
    assert retry_bells(bench) == [], "no companion needs a message of its own"
    assert not list((bench.source_settings.inbox_dir).glob("batch-*")), "the folder is removed"


def test_a_file_the_server_skips_is_converted_alone_and_fails_with_its_own_code(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(batches=True, processing={"batch_max_docs": 4, **FIRST_CLAIM_ONLY})
    ids = submit_samples(bench, 4)
    skipped = Path((bench.store.reads.get_job(ids[2]) or pytest.fail()).source_uri).name
    bench.server.configure(dir_skip=[skipped])

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    for number in (1, 2, 4):
        assert_own_result(bench, ids[number - 1], number)
    released = bench.store.reads.get_job(ids[2])
    assert released is not None and released.state is JobState.QUEUED
    assert (released.attempt, released.attempts_spent) == (1, 0), "the batch cost it nothing"
    assert len(retry_bells(bench)) == 1
    # Alone, the server really cannot convert it: it fails with its own code.
    bench.server.configure(fail_next=1, fail_with="is_error", fail_tools=[CONVERT])
    alone = bench.take(ids[2])
    assert (alone.kind, alone.code) == (OutcomeKind.FAILED, "E306")
    assert len(bench.server.stats()["directory_calls"]) == 1, "a retry is never batched again"


def test_a_file_skipped_in_the_batch_but_fine_alone_succeeds_alone(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(batches=True, processing={"batch_max_docs": 3})
    ids = submit_samples(bench, 3)
    first = Path((bench.store.reads.get_job(ids[0]) or pytest.fail()).source_uri).name
    bench.server.configure(dir_skip=[first])

    lead = bench.take(ids[0])

    assert lead.kind is OutcomeKind.RETRY and not lead.attempt_spent and lead.countdown_s == 0
    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED
    for number, job_id in enumerate(ids, start=1):
        assert_own_result(bench, job_id, number)
    job = bench.store.reads.get_job(ids[0])
    assert job is not None and (job.attempt, job.attempts_spent) == (2, 1)


def test_a_batch_of_one_is_exactly_the_single_path(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench(
        batches=True, processing={"batch_max_docs": 1, "round_max_docs": 1, **FIRST_CLAIM_ONLY}
    )
    ids = submit_samples(bench, 3)

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    stats = bench.server.stats()
    assert stats["directory_calls"] == [] and stats["requests_by_tool"][CONVERT] == 1
    assert [(bench.store.reads.get_job(i) or pytest.fail()).state for i in ids[1:]] == [
        JobState.QUEUED, JobState.QUEUED,
    ]  # fmt: skip
    assert batch_notes(bench, ids[0]) == []


def test_a_failed_batch_gives_each_job_the_outcome_it_would_have_had_alone(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(
        batches=True,
        processing={"batch_max_docs": 3},
        resilience={"retry_max_tries": 1, "breaker_fail_max": 100},
    )
    bench.server.configure(fail_next=1, fail_with="http503", fail_tools=[DIRECTORY])
    ids = submit_samples(bench, 3)

    lead = bench.take(ids[0])

    assert (lead.kind, lead.code, lead.attempt_spent) == (OutcomeKind.RETRY, "E302", True)
    for job_id in ids:
        job = bench.store.reads.get_job(job_id)
        assert job is not None and job.state is JobState.RETRYING and job.error_code == "E302"
        assert (job.attempt, job.attempts_spent) == (1, 1)
    bells = retry_bells(bench)
    assert len(bells) == len(ids) and all(due > 0 for due in bells), "each rung for its retry"


def test_cancelling_one_job_of_a_running_batch_writes_nothing_for_it(
    make_bench: Callable[..., Bench],
) -> None:
    bench = make_bench(batches=True, processing={"batch_max_docs": 3, "cancel_check_s": 0.1})
    bench.server.configure(delay_s=3, delay_tools=[DIRECTORY])
    ids = submit_samples(bench, 3)
    outcomes: list[Outcome] = []
    worker = threading.Thread(target=lambda: outcomes.append(bench.take(ids[0])))
    worker.start()
    wait_for(lambda: bench.server.stats()["tool_calls_in_flight"] == 1, message="in the batch")
    events_before = len(bench.store.reads.events(ids[1]))

    assert bench.store.operations.cancel(ids[1]) is not None
    worker.join(timeout=60)

    assert outcomes and outcomes[0].kind is OutcomeKind.SUCCEEDED
    cancelled = bench.store.reads.get_job(ids[1])
    assert cancelled is not None and cancelled.state is JobState.CANCELLED
    assert bench.store.reads.list_results(ids[1]) == []
    later = bench.store.reads.events(ids[1])[events_before:]
    assert [(e.kind, e.to_state) for e in later] == [(EventKind.STATE_CHANGE, JobState.CANCELLED)]
    for number in (1, 3):
        assert_own_result(bench, ids[number - 1], number)


def test_stats_and_metrics_show_the_batch_sizes(
    make_bench: Callable[..., Bench], store_settings: StoreSettings
) -> None:
    bench = make_bench(batches=True, processing={"batch_max_docs": 4, **FIRST_CLAIM_ONLY})
    ids = submit_samples(bench, 6)
    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED  # a batch of 4
    assert bench.take(ids[4]).kind is OutcomeKind.SUCCEEDED  # a batch of 2

    with JobStore(store_settings, explain_missing_schema=True) as admin:
        batches = batches_since(admin, datetime.now(UTC) - timedelta(hours=1))
    assert (batches.batches, batches.documents, batches.largest) == (2, 6, 4)
    assert batches.mean_size == 3.0


@pytest.mark.parametrize("order", ["listed", "reversed"])
def test_a_cache_hit_named_after_another_member_proves_nothing(
    make_bench: Callable[..., Bench], order: str
) -> None:
    """The server answers a cache hit with the document converted first, whose origin names the
    file it had then. ``a.md`` is converted; later ``b.md`` has that same content and a new
    ``a.md`` does not: both keys' JSON name ``a.md``, and by name alone the new ``a.md`` got the
    old content whenever the old key came first. The content hash in the origin decides."""
    from pipeline.jobs.request import SubmissionRequest
    from pipeline.submission.intake import enqueue

    bench = make_bench(batches=True, processing={"batch_max_docs": 2})
    bench.server.configure(dir_order=order)
    first, second = bench.folder / "first", bench.folder / "second"
    first.mkdir(parents=True)
    second.mkdir()
    (first / "a.md").write_text("# Old a\n\nThe first a.md.\n")
    (second / "a.md").write_text("# New a\n\nAnother a.md.\n")
    (second / "b.md").write_text("# Old a\n\nThe first a.md.\n")
    old = bench.submit_one(first / "a.md")
    assert bench.take(old).kind is OutcomeKind.SUCCEEDED
    submission = enqueue(
        # b.md's content has succeeded before
        SubmissionRequest([str(second / "a.md"), str(second / "b.md")], dedup=False),
        publisher=bench.publisher,
        store=bench.store,
        source_settings=bench.source_settings,
    )
    new_a, b = (a.job_id for a in submission.accepted)

    bench.take(new_a)
    for job_id in (new_a, b):
        job = bench.store.reads.get_job(job_id)
        if job is not None and not job.state.terminal:
            bench.take(job_id)  # an unproven member, converted alone

    assert "New a" in (bench.store.reads.get_result(new_a, "md") or "")
    assert "Old a" in (bench.store.reads.get_result(b, "md") or "")


SAVE = "save_docling_document"


@pytest.mark.parametrize("order", ["listed", "shuffled"])
def test_the_last_key_is_proven_by_elimination_without_a_save(
    make_bench: Callable[..., Bench], order: str
) -> None:
    """Six files, six distinct keys, distinct contents: five saves prove five keys, the sixth
    is the sixth file's, whatever order the server answered in."""
    bench = make_bench(batches=True, processing={"batch_max_docs": 6})
    bench.server.configure(dir_order=order, dir_seed=3)
    ids = submit_samples(bench, 6)

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    assert bench.server.stats()["requests_by_tool"].get(SAVE) == 5
    for number, job_id in enumerate(ids, start=1):
        assert_own_result(bench, job_id, number)


def test_no_elimination_when_the_server_skipped_a_file(make_bench: Callable[..., Bench]) -> None:
    bench = make_bench(batches=True, processing={"batch_max_docs": 6, **FIRST_CLAIM_ONLY})
    ids = submit_samples(bench, 6)
    skipped = Path((bench.store.reads.get_job(ids[5]) or pytest.fail()).source_uri).name
    bench.server.configure(dir_skip=[skipped], dir_order="reversed")

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED

    assert bench.server.stats()["requests_by_tool"].get(SAVE) == 5, "every key answered proven"
    for number, job_id in enumerate(ids[:5], start=1):
        assert_own_result(bench, job_id, number)
    left = bench.store.reads.get_job(ids[5])
    assert left is not None and left.state is JobState.QUEUED, "converted alone, not guessed"


def test_a_table_over_the_cap_is_converted_alone(make_bench: Callable[..., Bench]) -> None:
    """``DOCLANE_BATCH_MAX_TABLE_BYTES``: a CSV larger than it neither joins nor leads a batch
    (its Docling JSON would cost more to save than the call it shares)."""
    bench = make_bench(
        batches=True,
        processing={
            "batch_max_docs": 6,
            "batch_max_table_bytes": 10,
            "round_max_docs": 1,
            **FIRST_CLAIM_ONLY,
        },
    )
    ids = submit_samples(bench, 6)  # html, csv, md, html, csv, md

    assert bench.take(ids[0]).kind is OutcomeKind.SUCCEEDED
    csv = [ids[1], ids[4]]
    for job_id in csv:
        job = bench.store.reads.get_job(job_id)
        assert job is not None and job.state is JobState.QUEUED and batch_notes(bench, job_id) == []
    assert bench.take(csv[0]).kind is OutcomeKind.SUCCEEDED
    assert len(bench.server.stats()["directory_calls"]) == 1, "the CSV did not lead a batch"
    left = bench.store.reads.get_job(csv[1])
    assert left is not None and left.state is JobState.QUEUED
    for number in (1, 2, 3, 4, 6):
        assert_own_result(bench, ids[number - 1], number)


def test_a_server_without_the_directory_tool_is_never_sent_a_batch(
    make_bench: Callable[..., Bench],
    fake_server_factory: Callable[..., FakeServer],
    store_settings: StoreSettings,
) -> None:
    """Batches on (a cache folder, several documents a call), a server with no directory tool
    (docling-rs-mcp has none; the per-format fake neither): it is asked once, before any
    companion is claimed, and every job is converted on its first attempt, with no note of a
    batch that never ran and nothing for the batch counters."""
    server = fake_server_factory(profile="per-format")  # its tools convert DOCX, say
    bench = make_bench(server, batches=True, processing={"batch_max_docs": 4})
    asked: list[str] = []
    ask = bench.runner.on_each_server

    def counted(look: Callable[[Any], Any]) -> list[Any]:
        asked.append(getattr(look, "__qualname__", ""))
        return ask(look)

    bench.runner.on_each_server = counted  # type: ignore[method-assign]
    submission = bench.submit(*[write_sample(bench.folder, "docx", n) for n in range(1, 9)])
    assert not submission.rejected
    ids = [a.job_id for a in submission.accepted]

    for job_id in ids:
        job = bench.store.reads.get_job(job_id)
        if job is not None and not job.state.terminal:
            bench.take(job_id)

    assert server.stats()["directory_calls"] == []
    for number, job_id in enumerate(ids, start=1):
        job = bench.store.reads.get_job(job_id)
        assert job is not None and job.state is JobState.SUCCEEDED, (job_id, job)
        assert (job.attempt, job.attempts_spent) == (1, 1), "no attempt went to a batch"
        assert batch_notes(bench, job_id) == []
        assert f"sample-{number:04d}" in (bench.store.reads.get_result(job_id, "md") or "")
    assert sum(1 for name in asked if name.startswith("ServerBatching")) == 1, asked
    with JobStore(store_settings, explain_missing_schema=True) as admin:
        batches = batches_since(admin, datetime.now(UTC) - timedelta(hours=1))
    assert (batches.batches, batches.documents) == (0, 0)
