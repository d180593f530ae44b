"""The issue's snippet, sync and async, against a real API, worker and MCP server."""

from __future__ import annotations

from doclane_client import JobState

from tests.client.conftest import Fleet


def test_uploads_wait_and_results(fleet: Fleet) -> None:
    paths = [fleet.document("report.md"), fleet.document("slides.md")]
    with fleet.client() as dl:
        jobs = dl.submit(paths, to=["md"])
        assert [j.source for j in jobs] == [str(p) for p in paths] and not jobs.rejected
        ended = list(dl.wait(jobs, timeout=120))
        assert sorted(str(j.id) for j in ended) == sorted(j.id for j in jobs)
        for job in ended:
            assert job.state == JobState.SUCCEEDED, (job.error_code, job.error_message)
            text = dl.result(job.id, "md")
            assert "About" in text
