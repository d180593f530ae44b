"""The admin views' pure parts: time filters, parts under a deadline, the histogram, the page,
and uploads streamed to disk under a cap."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from errors import DatabaseUnavailable, SourceTooLarge
from pipeline.admin.fleet import BreakerState, QueueDepth, WorkerInfo
from pipeline.admin.jobs import parse_since
from pipeline.admin.stats import Failures, QueueBacklog, Stats, run_parts
from pipeline.api.metrics import _event_metrics
from pipeline.api.page import render_page
from pipeline.api.uploads import BadUpload, receive_upload, safe_name
from pipeline.cli.admin_commands import render_stats
from pipeline.store.admin import EventTotal

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "ago"),
    [("30m", timedelta(minutes=30)), ("1h", timedelta(hours=1)), ("2d", timedelta(days=2)),
     ("1.5h", timedelta(minutes=90)), (" 1w ", timedelta(weeks=1)), ("45s", timedelta(seconds=45))],
)  # fmt: skip
def test_since_takes_durations_ago(text: str, ago: timedelta) -> None:
    assert parse_since(text, now=NOW) == NOW - ago


def test_since_takes_iso_times_and_refuses_the_rest() -> None:
    assert parse_since("2026-11-23T08:00:00Z") == datetime(2026, 11, 23, 8, tzinfo=UTC)
    assert parse_since("2026-11-23T08:00:00").tzinfo is UTC
    with pytest.raises(ValueError, match="not a time"):
        parse_since("yesterday")


def test_parts_that_hang_or_fail_are_named_and_the_rest_still_answer() -> None:
    release = threading.Event()
    try:
        answers, unreachable = run_parts(
            {
                "database": lambda: 42,
                "broker": lambda: release.wait(60),
                "redis": _raise(ConnectionError("refused")),
                "store": _raise(DatabaseUnavailable("down")),
            },
            deadline_s=0.3,
        )
    finally:
        release.set()
    assert answers == {"database": 42}
    assert unreachable == {
        "broker": "no answer within 0.3s",
        "redis": "ConnectionError: refused",
        "store": "E401: down",
    }


def _raise(exc: Exception):  # type: ignore[no-untyped-def]
    def part() -> None:
        raise exc

    return part


def test_the_latency_histogram_is_cumulative_over_the_migration_bounds() -> None:
    bounds = [0.0, 25.0, 50.0, 100.0]
    events = [
        EventTotal("mcp_call", "convert", "ok", 1, 2, 30.0),  # two calls under 25 ms
        EventTotal("mcp_call", "convert", "error", 3, 1, 70.0),  # one in [50, 100)
        EventTotal("mcp_call", "convert", "ok", 4, 1, 900.0),  # one above the last bound
        EventTotal("state_change", "retrying", "", 0, 5, 0.0),
        EventTotal("state_change", "failed", "", 0, 7, 0.0),
    ]
    calls, retries, latency = _event_metrics(events, bounds)
    assert {(s.labels["outcome"], s.value) for s in calls.samples} == {("ok", 3.0), ("error", 1.0)}
    assert [s.value for s in retries.samples if s.name.endswith("_total")] == [5.0]
    buckets = {s.labels["le"]: s.value for s in latency.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.025": 2.0, "0.05": 2.0, "0.1": 3.0, "+Inf": 4.0}
    [total] = [s.value for s in latency.samples if s.name.endswith("_sum")]
    assert total == pytest.approx(1.0)


def _stats(**changes: object) -> Stats:
    base = Stats(
        at=NOW,
        jobs={"queued": 1, "running": 0, "retrying": 0, "succeeded": 12, "failed": 3,
              "cancelled": 0},
        conversion_window_s=3600,
        failures=[Failures(code="E101", title="source not found or unreadable",
                           message="The document <b>could</b> not be found.", action="",
                           last_hour=2, all_time=3)],
        breakers=[BreakerState(origin="http://s:1", state="open", failures=5, fail_max=5,
                               retry_after_s=12)],
        queues=[QueueBacklog(queue="doclane.small", queued=40, tenants={"default": 40})],
        bells=[QueueDepth(queue="doclane.small", waiting=4)],
        workers=[WorkerInfo(name="w1@host", concurrency=2, tasks_done=9)],
    )  # fmt: skip
    return base.model_copy(update=changes)


def test_the_page_shows_the_figures_escaped_and_fetches_nothing() -> None:
    html = render_page(_stats(), refresh_s=5)
    assert 'id="jobs-succeeded">12<' in html and 'id="failures-E101-all">3<' in html
    assert 'id="queue-doclane.small">40<' in html and "w1@host" in html and "12s" in html
    assert "&lt;b&gt;could&lt;/b&gt;" in html
    assert "<script" not in html and "src=" not in html and "<link" not in html
    # links only (no asset), each into the console: a failure code to its failed jobs
    assert re.findall(r'href="([^"]*)"', html) == [
        "/console/jobs",
        "/console/jobs?state=failed&amp;error_code=E101",
    ]
    assert '<meta http-equiv="refresh" content="5">' in html


def test_stats_shows_the_queued_jobs_and_says_whose_count_the_bells_are_and_how_old() -> None:
    queued = next(x for x in render_stats(_stats()).splitlines() if x.startswith("queued "))
    assert queued.endswith("doclane.small 40"), "PostgreSQL's backlog, not the broker's bells"
    counted = [QueueDepth(queue="doclane.small", waiting=4, age_s=2.46, counted_by="w1@host")]
    line = next(x for x in render_stats(_stats(bells=counted)).splitlines() if "bells" in x)
    assert line.endswith("doclane.small 4  (w1@host's count, 2.5s old)")
    asked = next(x for x in render_stats(_stats()).splitlines() if "bells" in x)
    assert asked.endswith("doclane.small 4"), "asked of the broker just now: nothing to say"


def test_the_page_says_which_part_it_could_not_reach() -> None:
    html = render_page(_stats(jobs=None, unreachable={"database": "E401: down"}), refresh_s=5)
    assert 'data-unreachable="database"' in html and "jobs-succeeded" not in html


def test_upload_names_cannot_climb_out_of_their_folder() -> None:
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("C:\\docs\\report.docx") == "report.docx"
    assert safe_name("..") == "upload" and safe_name("a b;c.md") == "a b_c.md"


def _form(content: bytes, *, boundary: str = "B0undary") -> tuple[str, list[bytes]]:
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="to"\r\n\r\nmd,json\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.md"\r\n'
            "Content-Type: text/markdown\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return f"multipart/form-data; boundary={boundary}", [
        body[i : i + 7] for i in range(0, len(body), 7)
    ]


async def _chunks(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def test_an_upload_is_written_as_it_arrives(tmp_path: Path) -> None:
    kind, pieces = _form(b"# hello\n" * 10)
    upload = asyncio.run(
        receive_upload(kind, None, _chunks(pieces), inbox=tmp_path, max_bytes=1000)
    )
    assert upload.path.read_bytes() == b"# hello\n" * 10 and upload.size_bytes == 80
    assert upload.fields == {"to": "md,json"} and upload.path.parent.parent == tmp_path / "uploads"


def test_an_upload_past_the_cap_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    kind, pieces = _form(b"x" * 500)
    with pytest.raises(SourceTooLarge):
        asyncio.run(receive_upload(kind, None, _chunks(pieces), inbox=tmp_path, max_bytes=100))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    with pytest.raises(SourceTooLarge):  # a Content-Length that says so: refused unread
        asyncio.run(receive_upload(kind, 10**9, _chunks([]), inbox=tmp_path, max_bytes=100))


def test_a_form_without_a_file_or_boundary_is_a_bad_upload(tmp_path: Path) -> None:
    with pytest.raises(BadUpload):
        asyncio.run(receive_upload("multipart/form-data", None, _chunks([]), inbox=tmp_path,
                                   max_bytes=100))  # fmt: skip
    body = b'--B\r\nContent-Disposition: form-data; name="to"\r\n\r\nmd\r\n--B--\r\n'
    with pytest.raises(BadUpload, match="no field 'file'"):
        asyncio.run(receive_upload("multipart/form-data; boundary=B", None, _chunks([body]),
                                   inbox=tmp_path, max_bytes=100))  # fmt: skip
