"""doclane_client's whole flow, blocking and async, against a real API, worker and MCP server:
uploads and sources, ``wait``, results whole and streamed, cancel, retry, listing with filters
and pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from doclane_client import Client, JobState, Submitted, WrongState

from tests.fixtures.http_source import HttpSource
from tests.support.client_fleet import Fleet, Recording


def _documents(fleet: Fleet, http_source: HttpSource) -> tuple[list[Path], list[str]]:
    """Two files to upload, and two sources: a URL the worker fetches, a path it reads."""
    uploads = [fleet.document("report.md"), fleet.document("slides.md")]
    http_source.serve("/x.md", b"# From the web\n\nFetched by the worker.\n",
                      content_type="text/markdown")  # fmt: skip
    on_server = fleet.document("shared.md", "# On the server\n\nRead where it lies.\n")
    return uploads, [http_source.url("/x.md"), str(on_server)]


def test_submit_wait_and_results(fleet: Fleet, http_source: HttpSource) -> None:
    uploads, sources = _documents(fleet, http_source)
    fleet.start_worker()
    with Client(fleet.url, token=fleet.tokens["submit"]) as dl:
        jobs = dl.submit(uploads, to=["md"])  # uploads local files
        jobs += dl.submit_sources(sources, to=["md"])
        assert [j.source for j in jobs] == [*map(str, uploads), *sources] and not jobs.rejected
        texts: dict[str, str] = {}
        for job in dl.wait(jobs, timeout=120):  # yields each job as it ends, any order
            assert job.state == "succeeded", (job.error_code, job.error_message)
            texts[job.source_uri] = dl.result(job.id, "md")  # str
            streamed = b"".join(dl.result_stream(job.id, "md"))
            assert streamed.decode() == texts[job.source_uri]
        assert len(texts) == 4
    assert "Fetched by the worker" in texts[sources[0]]
    assert "Read where it lies" in texts[sources[1]]
    assert any("About report.md" in text for text in texts.values())


@pytest.mark.anyio
async def test_the_same_with_the_async_client(fleet: Fleet, http_source: HttpSource) -> None:
    uploads, sources = _documents(fleet, http_source)
    fleet.start_worker()
    async with fleet.async_client("submit") as dl:
        jobs = await dl.submit(uploads, to="md")
        jobs += await dl.submit_sources(sources, to="md")
        ended = [job async for job in dl.wait(jobs, timeout=120)]
        assert sorted(str(j.id) for j in ended) == sorted(j.id for j in jobs)
        assert {j.state for j in ended} == {JobState.SUCCEEDED}
        text = await dl.result(jobs[2], "md")
        assert "Fetched by the worker" in text
        pieces = [piece async for piece in dl.result_stream(jobs[2].id, "md")]
        assert b"".join(pieces).decode() == text
        detail = await dl.job(jobs[0])
        assert [r.format for r in detail.results] == ["md"]
        stats = await dl.stats()
        assert stats.jobs is not None and stats.jobs["succeeded"] == 4


def test_cancel_retry_and_the_lists(fleet: Fleet) -> None:
    """No worker: the jobs stay queued, so cancel and retry act on known states."""
    with fleet.client() as dl:
        jobs = dl.submit_sources([str(fleet.document(f"doc-{n}.md")) for n in range(5)])
        first = jobs[0]
        assert dl.cancel(first.id).state == JobState.CANCELLED
        with pytest.raises(WrongState) as refused:
            dl.cancel(first)
        assert refused.value.status == 409 and refused.value.code == "wrong_state"
        again = dl.retry(first)
        assert again.action == "resubmitted" and str(again.retry_of) == first.id
        assert str(again.job_id) != first.id

        cancelled = list(dl.jobs(state="cancelled", since="1h"))
        assert [str(j.id) for j in cancelled] == [first.id]
        mine = list(dl.jobs(submission=jobs[0].submission_id))
        assert sorted(str(j.id) for j in mine) == sorted(j.id for j in jobs)
        assert [j.created_at for j in mine] == sorted((j.created_at for j in mine), reverse=True)
        assert len(list(dl.jobs(limit=3))) == 3


def test_paging(fleet: Fleet) -> None:
    """``jobs()`` pages by keyset: each page's ``next_before`` is the next request's ``before``
    (the console's cursor); a page of 3 over 7 jobs of one submission (one created_at, told
    apart by id) and 2 of another is four requests, every job once, newest first."""
    made: list[Submitted] = []
    with fleet.client() as setup:
        made += setup.submit_sources([str(fleet.document(f"page-{n}.md")) for n in range(7)])
        made += setup.submit_sources([str(fleet.document(f"later-{n}.md")) for n in range(2)])
    wire = Recording()
    with fleet.client(transport=wire) as dl:
        listed = list(dl.jobs(page_size=3))
        assert len(list(dl.jobs(page_size=2, limit=5))) == 5
        one = list(dl.jobs(page_size=2, submission=made[0].submission_id, state="queued"))
    assert sorted(str(j.id) for j in listed) == sorted(j.id for j in made)
    assert len({j.id for j in listed}) == 9
    order = [(j.created_at, str(j.id)) for j in listed]
    assert order == sorted(order, reverse=True)
    assert {str(j.id) for j in listed[:2]} == {j.id for j in made[7:]}
    assert sorted(str(j.id) for j in one) == sorted(j.id for j in made[:7])
    pages = [outcome for _, path, outcome, _ in wire.log if path == "/v1/jobs"]
    assert pages == [200] * (4 + 3 + 4)  # 3+3+3+empty; 2+2+1 of limit 5; 2+2+2+1


@pytest.mark.anyio
async def test_paging_with_the_async_client(fleet: Fleet) -> None:
    with fleet.client() as setup:
        made = setup.submit_sources([str(fleet.document(f"page-{n}.md")) for n in range(5)])
    async with fleet.async_client() as dl:
        listed = [str(job.id) async for job in dl.jobs(page_size=2)]
    assert sorted(listed) == sorted(j.id for j in made) and len(set(listed)) == 5
