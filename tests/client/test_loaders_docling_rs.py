"""``to="chunks"``: one Document per chunk, from the real docling-rs-mcp (a stdio child of the
worker), with each chunk's pages and headings; the issue's ``to=["md", "chunks"]`` snippet."""

from __future__ import annotations

from pathlib import Path

import pytest
from doclane_client.langchain import DoclaneLoader
from doclane_client.llama_index import DoclaneReader

from tests.client.conftest import FAST, Fleet
from tests.fixtures.docling_rs_server import docling_rs_stdio_command
from tests.fixtures.examples import PDF_PAGE_HEADINGS, PDF_SAMPLE, example

pytestmark = pytest.mark.docling
ENGINE = "docling-rs 2.52.7"


@pytest.fixture
def fleet_env(tmp_path: Path) -> dict[str, str]:
    """The worker's server: docling-rs-mcp, reading the samples and this test's folders (the
    API's uploads land in the inbox under it)."""
    return {"DOCLING_MCP_COMMAND": docling_rs_stdio_command([tmp_path])}


def test_chunks_with_pages_as_langchain_and_llama_index_documents(fleet: Fleet) -> None:
    fleet.start_worker()
    pdf = fleet.folder / PDF_SAMPLE
    pdf.write_bytes(example(PDF_SAMPLE).read_bytes())  # uploaded: under the server's roots
    options = {"url": fleet.url, "token": fleet.tokens["submit"], "client": dict(FAST)}

    chunks = list(DoclaneLoader(pdf, to="chunks", **options).lazy_load())
    assert len(chunks) > 1
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    first = chunks[0].metadata
    assert (first["source"], first["format"], first["engine"]) == (str(pdf), "chunks", ENGINE)
    assert len({c.metadata["job_id"] for c in chunks}) == 1
    assert {c.id for c in chunks} == {f"{first['job_id']}:{n}" for n in range(len(chunks))}
    text = " ".join(c.page_content for c in chunks)
    assert all(heading in text for heading in PDF_PAGE_HEADINGS)
    pages = {page for c in chunks for page in c.metadata.get("pages", [])}
    assert pages == {1, 2, 3}, [c.metadata for c in chunks]

    read = DoclaneReader(to="chunks", **options).load_data([pdf])  # dedup: the same job
    assert [d.text for d in read] == [c.page_content for c in chunks]
    assert [d.id_ for d in read] == [c.id for c in chunks]


def test_the_issue_snippet_with_md_and_chunks(fleet: Fleet) -> None:
    fleet.start_worker()
    pdf = fleet.folder / PDF_SAMPLE
    pdf.write_bytes(example(PDF_SAMPLE).read_bytes())
    with fleet.client("submit") as dl:
        jobs = dl.submit([pdf], to=["md", "chunks"], options={"pages": "1-2"})
        for job in dl.wait(jobs, timeout=300):
            assert job.state == "succeeded", (job.error_code, job.error_message)
            markdown = dl.result(job.id, "md")
            assert PDF_PAGE_HEADINGS[1] in markdown and PDF_PAGE_HEADINGS[2] not in markdown
            assert '"hierarchical"' in dl.result(job.id, "chunks")
