"""Submission against a real database, with a publisher that records (and one failed publish
that the reconciler makes good)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from errors import DatabaseUnavailable, NothingToConvert, UnknownTenant
from pipeline.jobs.formats import Formats
from pipeline.jobs.model import JobState
from pipeline.jobs.options import ConversionOptions
from pipeline.jobs.request import SubmissionRequest
from pipeline.profiles.settings import ProfileSettings
from pipeline.queues import SMALL_BELOW_BYTES, RecordingPublisher, Wakeup
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import read_settings
from pipeline.store.pool import StorePool
from pipeline.store.settings import StoreSettings
from pipeline.store.store import JobStore
from pipeline.store.submissions import Submissions
from pipeline.submission import intake
from pipeline.submission.door import Door, server_tools
from pipeline.submission.intake import CHUNK_FIRST, CHUNK_MAX, enqueue
from tests.fixtures.samples import write_mixed, write_sample
from tests.support.long_pdf import write_long_pdf

#: A door with no server to ask: what the best server could do passes (these tests are not
#: about the door, tests/integration/submission/test_door.py is).
ANY_SERVER = Door([], ProfileSettings(), server_tools)


def covered(publisher: CheckingPublisher) -> list[UUID]:
    """The queued jobs a separate connection saw in a bell's queue when it rang, in order."""
    return list(dict.fromkeys(publisher.seen))


class CheckingPublisher(RecordingPublisher):
    """Notes what a *separate* connection sees queued in a bell's queue as it rings: a bell
    rung before its jobs were committed would find them missing."""

    def __init__(self, other: JobStore, fail: set[int] | None = None) -> None:
        super().__init__()
        self.other = other
        self.fail = fail or set()
        self.calls = 0
        self.seen: list[UUID] = []

    def publish(self, wakeup: Wakeup) -> None:
        self.calls += 1
        rows = self.other.pool.fetch_rows(
            "reading what a bell rings for",
            "SELECT id FROM jobs WHERE queue = %(queue)s AND state = 'queued' "
            "ORDER BY created_at, id",
            {"queue": wakeup.queue},
        )
        if self.calls in self.fail:
            raise ConnectionError("broker down")
        self.seen.extend(row["id"] for row in rows)
        super().publish(wakeup)


def test_rows_are_committed_before_publishing_and_rejections_do_not_stop_others(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    good = write_mixed(docs, 6)
    (docs / "empty.md").write_bytes(b"")
    (docs / "fake.docx").write_bytes(b"not a zip")
    outside = tmp_path / "elsewhere" / "a.md"
    outside.parent.mkdir()
    outside.write_text("# outside")
    publisher = CheckingPublisher(make_store())
    settings = read_settings(sources=dict(allowed_roots=(docs,))).sources

    asked = SubmissionRequest(
        [
            str(docs),
            str(docs / "missing.md"),
            str(outside),
            "http://127.0.0.1/x.md",
            "ftp://example.org/a.md",
        ],
        Formats.parse("md,json"),
    )
    submission = enqueue(
        asked,
        door=ANY_SERVER,
        publisher=publisher,
        store=store,
        source_settings=settings,
    )

    assert len(submission.accepted) == len(good)
    assert all(a.published and a.queue == "doclane.small" for a in submission.accepted)
    refused = {r.source: r.code for r in submission.rejected}
    assert refused == {
        str(docs / "empty.md"): "E106",
        str(docs / "fake.docx"): "E102",
        str(docs / "missing.md"): "E101",
        str(outside): "E105",
        "http://127.0.0.1/x.md": "E104",
        "ftp://example.org/a.md": "E104",
    }
    assert covered(publisher) == submission.job_ids
    assert len(publisher.messages) == len(good), "a bell a job, up to the wake-up's bells"
    job = store.reads.get_job(submission.job_ids[0])
    assert job is not None and job.formats == ("json", "md") and job.content_sha256


def test_a_refused_bell_leaves_queued_rows_that_the_reconciler_rings_for(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    paths = write_mixed(tmp_path / "docs", 20)
    publisher = CheckingPublisher(make_store(), fail={2})
    submission = enqueue(
        SubmissionRequest([str(p) for p in paths]), publisher=publisher, store=store
    )
    unpublished = [a.job_id for a in submission.accepted if not a.published]
    assert unpublished == submission.job_ids, "their queue's bell was refused"
    assert list(submission.publish_failures) == unpublished

    later = RecordingPublisher(depths={"doclane.small": 0})
    report = reconcile_once(store, later)

    assert report.rung == {"doclane.small": 8}
    assert {m.queue for m in later.messages} == {"doclane.small"}


def test_dedup_returns_the_succeeded_job_and_no_dedup_makes_a_new_one(
    store: JobStore, tmp_path: Path
) -> None:
    path = write_sample(tmp_path / "docs", "md", 1)
    publisher = RecordingPublisher()
    first = enqueue(SubmissionRequest([str(path)]), publisher=publisher, store=store).job_ids[0]
    claimed = store.attempts.claim(first, "w", 30)
    assert claimed is not None
    assert store.attempts.finish(first, claimed.attempt, {"md": "# done"})

    again = enqueue(SubmissionRequest([str(path)]), publisher=publisher, store=store)
    forced = enqueue(SubmissionRequest([str(path)], dedup=False), publisher=publisher, store=store)

    assert again.accepted[0].job_id == first and again.accepted[0].deduplicated
    assert forced.job_ids[0] != first
    assert len(publisher.messages) == 2, "a deduplicated job rings no bell"


def test_the_dedup_engine_setting_converts_again_what_another_engine_made(
    store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document converted by docling-mcp, submitted again once the fleet names docling-rs as
    its engine, is a new job; submitted again under docling's name, the same job."""
    path = write_sample(tmp_path / "docs", "md", 5)
    publisher = RecordingPublisher()
    first = enqueue(SubmissionRequest([str(path)]), publisher=publisher, store=store).job_ids[0]
    claimed = store.attempts.claim(first, "w", 30)
    assert claimed is not None
    engine = {"note": "converted", "engine": "docling"}
    assert store.attempts.finish(first, claimed.attempt, {"md": "# done"}, note=engine)

    monkeypatch.setenv("DOCLANE_DEDUP_ENGINE", "docling-rs")
    switched = enqueue(SubmissionRequest([str(path)]), publisher=publisher, store=store)
    monkeypatch.setenv("DOCLANE_DEDUP_ENGINE", "docling")
    same = enqueue(SubmissionRequest([str(path)]), publisher=publisher, store=store)

    assert not switched.accepted[0].deduplicated and switched.job_ids[0] != first
    assert same.accepted[0].deduplicated and same.job_ids[0] == first
    assert len(publisher.messages) == 2, "a deduplicated job rings no bell"


def test_the_wake_bells_setting_bounds_the_bells_a_submission_rings_a_queue(
    store: JobStore, tmp_path: Path
) -> None:
    """Twenty small jobs ring their queue as often as DOCLANE_WAKE_BELLS says, not 8."""
    paths = [write_sample(tmp_path / "docs", "md", i) for i in range(20)]
    publisher = RecordingPublisher()
    submit = read_settings(submit={"wake_bells": 3}).submit
    submission = enqueue(
        SubmissionRequest([str(p) for p in paths]),
        publisher=publisher,
        store=store,
        submit_settings=submit,
    )
    assert len(submission.job_ids) == 20
    assert [m.queue for m in publisher.messages] == ["doclane.small"] * 3


def test_queues_follow_the_size_tier(store: JobStore, tmp_path: Path) -> None:
    big = tmp_path / "docs" / "big.md"
    big.parent.mkdir()
    with big.open("wb") as out:
        out.write(b"# big\n")
        out.write(b"x" * (SMALL_BELOW_BYTES + 1))
    small = write_sample(tmp_path / "docs", "md", 2)

    submission = enqueue(
        SubmissionRequest([str(small), str(big)]), publisher=RecordingPublisher(), store=store
    )

    assert [a.queue for a in submission.accepted] == ["doclane.small", "doclane.medium"]


def test_unknown_formats_are_refused_where_they_are_parsed() -> None:
    with pytest.raises(ValueError, match="pdf"):
        Formats.parse(("md", "pdf"))


def test_publishing_stops_trying_once_the_broker_is_plainly_down(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    """A broker that refuses a chunk's bells is down: the later chunks' are not tried (each
    try costs seconds), their rows stay queued for the reconciler."""
    paths = write_mixed(tmp_path / "docs", 200)  # two chunks
    publisher = CheckingPublisher(make_store(), fail=set(range(1, 100)))

    submission = enqueue(
        SubmissionRequest([str(p) for p in paths]), publisher=publisher, store=store
    )

    assert publisher.calls == 1
    assert sorted(submission.publish_failures) == sorted(submission.job_ids)
    assert {j.state for j in store.reads.get_jobs(submission.job_ids)} == {JobState.QUEUED}


@pytest.fixture
def admin_store(store_settings: StoreSettings) -> Iterator[JobStore]:
    """Another connection's view of the rows: the admin's whole-table counts."""
    admin = JobStore(store_settings, explain_missing_schema=True)
    yield admin
    admin.close()


class CountingPublisher(RecordingPublisher):
    """Notes, at each message, how many of the submission's rows another connection sees."""

    def __init__(self, other: JobStore) -> None:
        super().__init__()
        self.other = other
        self.rows_seen: list[int] = []

    def publish(self, wakeup: Wakeup) -> None:
        self.rows_seen.append(self.other.admin.count_by_state().get(JobState.QUEUED, 0))
        super().publish(wakeup)


def test_jobs_are_made_and_published_a_chunk_at_a_time_in_order(
    store: JobStore, admin_store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers start on the first 64 sources while the rest are still being hashed: each
    chunk's rows are committed, then published, then the next chunk is made."""
    monkeypatch.setattr(intake, "RING_AGAIN_S", 0.0)  # every chunk's bell due at once
    docs = tmp_path / "docs"
    for n in range(300):
        (docs / f"{n // 100}").mkdir(parents=True, exist_ok=True)
        (docs / f"{n // 100}" / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    (docs / "1" / "doc-150-empty.md").write_bytes(b"")  # a refusal amid the chunks
    publisher = CountingPublisher(admin_store)

    submission = enqueue(SubmissionRequest([str(docs)]), publisher=publisher, store=store)

    assert CHUNK_FIRST == 64 and CHUNK_MAX >= 256
    # 64, then 128, then the last 108 (eight bells, then one a chunk): the rows a bell sees
    # grow by chunk, never by file
    assert publisher.rows_seen == [64] * 8 + [192] + [300]
    names = [Path(a.uri).name for a in submission.accepted]
    assert names == sorted(names) and len(names) == 300
    # within a chunk (one created_at) ids ascend in the sources' order: the tie-break of every
    # oldest-first claim, so a submission is taken in its order
    ids = submission.job_ids
    assert all(chunk == sorted(chunk) for chunk in (ids[:64], ids[64:192], ids[192:]))
    assert [(r.code, Path(r.source).name) for r in submission.rejected] == [
        ("E106", "doc-150-empty.md")
    ]


@pytest.mark.parametrize("ring_again_s", [0.0, float("inf")])
def test_later_chunks_ring_again_when_the_last_bell_is_old_and_at_the_end(
    store: JobStore,
    admin_store: JobStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ring_again_s: float,
) -> None:
    """The first chunk rings up to the wake-up's bells; a later chunk rings its queue again
    only once the queue's last bell is ``RING_AGAIN_S`` old (a drain it woke may have found the
    queue empty and ended), and the submission's end rings for the chunks whose bell waited, so
    the last rows are always rung for (here with that age always reached, and never)."""
    monkeypatch.setattr(intake, "RING_AGAIN_S", ring_again_s)
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(400):  # chunks of 64, 128, 208
        (docs / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    publisher = CountingPublisher(admin_store)

    submission = enqueue(SubmissionRequest([str(docs)]), publisher=publisher, store=store)

    assert len(submission.job_ids) == 400 and all(a.published for a in submission.accepted)
    if ring_again_s == 0:
        assert publisher.rows_seen == [64] * 8 + [192, 400], "a bell a later chunk"
    else:
        assert publisher.rows_seen == [64] * 8 + [400], "the rest rung for once, at the end"
    assert {m.queue for m in publisher.messages} == {"doclane.small"}


def test_the_broker_found_down_is_not_tried_again_for_later_chunks(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(200):  # three chunks
        (docs / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    publisher = CheckingPublisher(make_store(), fail=set(range(1, 1000)))

    submission = enqueue(SubmissionRequest([str(docs)]), publisher=publisher, store=store)

    assert publisher.calls == 1
    assert sorted(submission.publish_failures) == sorted(submission.job_ids)
    assert not any(a.published for a in submission.accepted)


class FailingSecondChunk(Submissions):
    """The real submissions, whose database goes away after the first chunk is made."""

    def __init__(self, pool: StorePool) -> None:
        super().__init__(pool)
        self.chunks = 0

    def admit(self, specs: Any, **dedup: Any) -> Any:
        self.chunks += 1
        if self.chunks == 2:
            raise DatabaseUnavailable("creating jobs: the server closed the connection")
        return super().admit(specs, **dedup)


def test_a_database_lost_halfway_says_how_many_jobs_were_made_before(
    store: JobStore, admin_store: JobStore, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(100):
        (docs / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    failing = JobStore(store.settings)
    failing.submissions = FailingSecondChunk(failing.pool)
    publisher = CheckingPublisher(admin_store)

    with pytest.raises(DatabaseUnavailable) as caught:
        enqueue(SubmissionRequest([str(docs)]), publisher=publisher, store=failing)

    assert "64 job(s) of this submission were made before it" in caught.value.message
    assert caught.value.detail == {"jobs_made_before": 64}
    counts = admin_store.admin.count_by_state()
    assert counts[JobState.QUEUED] == sum(counts.values()) == 64
    assert len(covered(publisher)) == 64  # the first chunk is on its way to the workers
    failing.close()


def test_a_long_pdf_is_split_and_only_its_slices_are_published(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    long_pdf = write_long_pdf(tmp_path / "report.pdf", pages=70)
    short_pdf = write_long_pdf(tmp_path / "short.pdf", pages=32)
    publisher = CheckingPublisher(make_store())
    settings = read_settings(submit=dict(slice_pages=32)).submit
    submission = enqueue(
        SubmissionRequest([str(long_pdf), str(short_pdf)]),
        publisher=publisher,
        store=store,
        submit_settings=settings,
    )
    parent_id, whole_id = submission.job_ids
    parent = store.reads.get_job(parent_id)
    assert parent is not None and parent.state is JobState.WAITING and parent.slices_total == 3
    slices = sorted(
        (j for j in store.reads.get_jobs(covered(publisher)) if j.parent_id),
        key=lambda j: j.created_at,
    )
    assert sorted(j.options["pages"] for j in slices) == ["1-32", "33-64", "65-70"]
    assert [j for j in covered(publisher) if j not in {s.id for s in slices}] == [whole_id]
    assert all(item.published for item in submission.accepted)
    again = enqueue(
        SubmissionRequest([str(long_pdf)], Formats.parse("json")),
        door=ANY_SERVER,
        publisher=publisher,
        store=store,
        submit_settings=settings,
    )
    json_job = store.reads.get_job(again.job_ids[0])
    assert json_job is not None and json_job.state is JobState.QUEUED  # json is never sliced


def test_a_tenants_submission_is_its_and_past_its_quota_each_document_is_refused_with_e115(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    """Chunks of 64 then 128: the quota cuts inside the second, and every later source is
    refused alone with E115 while the ones before it are published jobs."""
    store.tenants.set("team-a", max_queued=100)
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(150):
        (docs / f"doc-{n:03d}.md").write_text(f"# Document {n}\n")
    publisher = CheckingPublisher(make_store())

    submission = enqueue(
        SubmissionRequest([str(docs)], tenant="team-a"), publisher=publisher, store=store
    )

    assert len(submission.accepted) == 100 and len(covered(publisher)) == 100
    assert len(submission.rejected) == 50
    assert {r.code for r in submission.rejected} == {"E115"}
    assert all("team-a" in r.message for r in submission.rejected)
    jobs = store.reads.get_jobs(submission.job_ids)
    assert {j.tenant for j in jobs} == {"team-a"}
    again = enqueue(
        SubmissionRequest([str(docs / "doc-000.md")], tenant="team-a", dedup=False),
        publisher=publisher,
        store=store,
    )
    assert not again.accepted and [r.code for r in again.rejected] == ["E115"]


def test_an_unknown_tenant_refuses_the_whole_submission_before_any_job(
    store: JobStore, tmp_path: Path
) -> None:
    write_sample(tmp_path, "md", 1)
    publisher = RecordingPublisher()
    with pytest.raises(UnknownTenant) as caught:
        enqueue(
            SubmissionRequest([str(tmp_path)], tenant="nobody"), publisher=publisher, store=store
        )
    assert caught.value.code == "E116" and "nobody" in caught.value.message
    assert not publisher.messages
    assert sum(store.admin.count_by_state().values()) == 0


def test_a_page_range_past_a_pdfs_end_refuses_that_pdf_alone_before_it_is_a_job(
    store: JobStore, make_store: Callable[[], JobStore], tmp_path: Path
) -> None:
    short = write_long_pdf(tmp_path / "short.pdf", pages=3)
    long = write_long_pdf(tmp_path / "long.pdf", pages=12)
    notes = tmp_path / "notes.md"  # not a PDF: its pages are the server's to judge
    notes.write_text("# Notes\n")
    damaged = tmp_path / "damaged.pdf"  # pages unknown here: left to the server too
    damaged.write_bytes(b"%PDF-1.7\nnot a page tree\n")
    publisher = CheckingPublisher(make_store())
    submission = enqueue(
        SubmissionRequest(
            [str(short), str(long), str(notes), str(damaged)],
            options=ConversionOptions.parse({"pages": "4-10"}),
        ),
        door=ANY_SERVER,
        publisher=publisher,
        store=store,
    )
    [refused] = submission.rejected
    assert (refused.source, refused.code) == (str(short), "E110")
    assert refused.message == "page range 4-10 is past the end of short.pdf, which has pages 1-3"
    accepted = {Path(item.uri).name for item in submission.accepted}
    assert accepted == {"long.pdf", "notes.md", "damaged.pdf"}
    assert sorted(covered(publisher)) == sorted(submission.job_ids)
    assert {j.options["pages"] for j in store.reads.get_jobs(submission.job_ids)} == {"4-10"}

    fits = enqueue(
        SubmissionRequest([str(short)], options=ConversionOptions.parse({"pages": "3"})),
        door=ANY_SERVER,
        publisher=publisher,
        store=store,
    )
    assert fits.rejected == [] and len(fits.accepted) == 1


def test_sources_that_name_no_document_are_e119_and_make_nothing(
    store: JobStore, tmp_path: Path
) -> None:
    """For every door alike (the CLI, the API's 422): a folder of hidden files and others'
    kinds is an error with its code, not an empty success; a refused source is no such case."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / ".draft.md").write_text("# hidden\n")
    (folder / "setup.exe").write_bytes(b"MZ")
    publisher = RecordingPublisher()
    with pytest.raises(NothingToConvert) as nothing:
        enqueue(SubmissionRequest([str(folder)]), publisher=publisher, store=store)
    assert nothing.value.code == "E119" and str(folder) in nothing.value.message
    assert nothing.value.detail == {"skipped": {"hidden": 1, "unsupported": 1}, "duplicates": 0}
    assert publisher.messages == [] and not any(store.reads.count_in_flight().values())
    refused = enqueue(
        SubmissionRequest([str(tmp_path / "missing.docx")]), publisher=publisher, store=store
    )
    assert [r.code for r in refused.rejected] == ["E101"] and refused.accepted == []
