"""A job's progress and its end, one statement each (migration 0009), and the COPY path for
large results: both ways of finishing must leave the same rows, in the same order."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from pipeline.jobs.model import Job, JobState, Stage
from pipeline.store import finishing as finishing_module
from pipeline.store.refusals import ResultFormatsRefused
from pipeline.store.rows import CallEvent
from pipeline.store.store import JobStore


@pytest.fixture(params=["one statement", "copy"])
def finishing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways ``finish`` stores results: inline parameters, or COPY (forced by a cap of 0)."""
    if request.param == "copy":
        monkeypatch.setattr(finishing_module, "INLINE_RESULTS_MAX_CHARS", 0)
    return str(request.param)


def call(tool: str, outcome: str = "ok", code: str | None = None) -> CallEvent:
    detail = {"message": f"{tool} said no"} if code else None
    return CallEvent(tool, 0.25, outcome, code, "http://docling:8000", detail)


def trail(store: JobStore, job: Job) -> list[tuple[str, str | None]]:
    """The attempt's events after its claim: (kind, tool or target state or note)."""
    out = []
    for event in store.reads.events(job.id):
        if event.attempt != job.attempt or (
            event.kind == "state_change" and event.to_state is JobState.RUNNING
        ):
            continue
        if event.kind == "mcp_call":
            out.append(("mcp_call", event.tool))
        elif event.kind == "note":
            out.append(("note", (event.detail or {}).get("note")))
        else:
            out.append(("state_change", event.to_state.value if event.to_state else None))
    return out


def test_a_stage_carries_its_calls_in_order_with_every_field(
    job_factory: Callable[..., Job], store: JobStore, raw_sql: psycopg.Connection
) -> None:
    job = job_factory(JobState.RUNNING)
    calls = [call("convert", "error", "E306"), call("convert"), call("save")]
    assert store.attempts.set_stage(job.id, job.attempt, Stage.EXPORTING, calls=calls)
    events = [event for event in store.reads.events(job.id) if event.kind == "mcp_call"]
    assert [(e.tool, e.outcome, e.error_code) for e in events] == [
        ("convert", "error", "E306"),
        ("convert", "ok", None),
        ("save", "ok", None),
    ]
    first = events[0]
    assert first.duration_ms == pytest.approx(250.0)
    assert first.server_origin == "http://docling:8000"
    assert first.detail == {"message": "convert said no"}
    nulls = raw_sql.execute(
        "SELECT detail IS NULL FROM job_events WHERE job_id = %s AND kind = 'mcp_call' ORDER BY id",
        (job.id,),
    ).fetchall()
    assert [row[0] for row in nulls] == [False, True, True]  # SQL NULL, not a JSON null
    after = store.reads.get_job(job.id)
    assert after is not None and after.stage is Stage.EXPORTING


def test_a_stale_stage_writes_its_calls_and_nothing_else(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING)
    assert not store.attempts.set_stage(
        job.id, job.attempt + 1, Stage.EXPORTING, calls=[call("late")]
    )
    assert [e.tool for e in store.reads.events(job.id) if e.kind == "mcp_call"] == ["late"]
    after = store.reads.get_job(job.id)
    assert after is not None and after.stage == job.stage


def test_finish_writes_the_calls_the_note_the_state_and_the_results(
    job_factory: Callable[..., Job], store: JobStore, finishing: str
) -> None:
    job = job_factory(JobState.RUNNING, formats=("md", "json"))
    results = {"md": "# Title\n\nnaïve — ünïcode ✓\n", "json": '{"a": 1}'}
    done = store.attempts.finish(
        job.id,
        job.attempt,
        results,
        calls=[call("export_md"), call("export_json")],
        note={"note": "converted with profile docling-mcp", "profile": "docling-mcp"},
    )
    assert done
    assert trail(store, job) == [
        ("mcp_call", "export_md"),
        ("mcp_call", "export_json"),
        ("note", "converted with profile docling-mcp"),
        ("state_change", "succeeded"),
    ]
    assert {fmt: store.reads.get_result(job.id, fmt) for fmt in results} == results
    after = store.reads.get_job(job.id)
    assert after is not None and (after.state, after.stage) == (JobState.SUCCEEDED, None)
    assert {info.format: info.attempt for info in store.reads.list_results(job.id)} == {
        "md": job.attempt,
        "json": job.attempt,
    }


def test_a_stale_finish_keeps_its_calls_and_note_and_stores_no_result(
    job_factory: Callable[..., Job], store: JobStore, finishing: str
) -> None:
    job = job_factory(JobState.RUNNING)
    done = store.attempts.finish(
        job.id, job.attempt + 1, {"md": "# x"}, calls=[call("export")], note={"note": "late"}
    )
    assert not done
    kinds = [(e.kind, e.tool) for e in store.reads.events(job.id) if e.kind in ("mcp_call", "note")]
    assert kinds == [("mcp_call", "export"), ("note", None)]
    assert store.reads.list_results(job.id) == []
    after = store.reads.get_job(job.id)
    assert after is not None and after.state is JobState.RUNNING


@pytest.mark.parametrize(
    "results",
    [{"md": "# only markdown"}, {"md": "# x", "json": "{}", "html": "<p>"}],
    ids=["missing", "extra"],
)
def test_wrong_formats_undo_everything(
    job_factory: Callable[..., Job],
    store: JobStore,
    finishing: str,
    results: dict[str, str],
) -> None:
    job = job_factory(JobState.RUNNING, formats=("md", "json"))
    before = len(store.reads.events(job.id))
    with pytest.raises(ResultFormatsRefused, match=r"wants formats"):
        store.attempts.finish(
            job.id, job.attempt, results, calls=[call("export")], note={"note": "x"}
        )
    after = store.reads.get_job(job.id)
    assert after is not None and after.state is JobState.RUNNING
    assert store.reads.list_results(job.id) == []
    assert len(store.reads.events(job.id)) == before


def test_progress_leaves_updated_at_and_a_change_moves_it(
    job_factory: Callable[..., Job], store: JobStore, raw_sql: psycopg.Connection
) -> None:
    """Migration 0010: a stage, a server or a lease is progress, not a change of the job (so
    the row can be updated in place); a writer that sets updated_at itself keeps its value."""
    job = job_factory(JobState.RUNNING)
    raw_sql.execute("UPDATE jobs SET updated_at = '2000-01-01Z' WHERE id = %s", (job.id,))

    def updated_year() -> int:
        row = store.reads.get_job(job.id)
        assert row is not None
        return row.updated_at.year

    assert updated_year() == 2000  # set by hand: kept
    assert store.attempts.set_stage(
        job.id, job.attempt, Stage.CONVERTING, origin="http://docling:8000"
    )
    assert store.attempts.set_stage(job.id, job.attempt, Stage.EXPORTING, calls=[call("convert")])
    assert store.attempts.renew_lease(job.id, job.attempt, 600)
    assert updated_year() == 2000
    assert store.attempts.record_source(job.id, job.attempt, size_bytes=7, content_sha256="b" * 64)
    assert updated_year() > 2000
    raw_sql.execute("UPDATE jobs SET updated_at = '2000-01-01Z' WHERE id = %s", (job.id,))
    assert store.attempts.finish(job.id, job.attempt, {"md": "# done"})
    assert updated_year() > 2000


def test_job_pages_keep_room_for_in_place_updates(raw_sql: psycopg.Connection) -> None:
    row = raw_sql.execute("SELECT reloptions FROM pg_class WHERE relname = 'jobs'").fetchone()
    assert row is not None and "fillfactor=80" in (row[0] or [])
