"""With the real docling-rs-mcp (a stdio child of the worker): the loaders' ``to="chunks"``, one
Document per chunk with its pages, and the docs' snippet (``to=["md", "chunks"]``) run as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from doclane_client.langchain import DoclaneLoader
from doclane_client.llama_index import DoclaneReader

from tests.fixtures.docling_rs_server import docling_rs_stdio_command
from tests.fixtures.examples import PDF_PAGE_HEADINGS, PDF_SAMPLE, example
from tests.fixtures.http_source import HttpSource
from tests.support.client_fleet import FAST, Fleet

pytestmark = pytest.mark.docling
ENGINE = "docling-rs 2.52.7"
REPO = Path(__file__).resolve().parents[2]


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


def _snippet(markdown: Path) -> str:
    """The first Python block of a markdown file."""
    return markdown.read_text().split("```python\n", 1)[1].split("```", 1)[0]


def test_the_snippet_of_the_docs(
    fleet: Fleet, http_source: HttpSource, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/client.md's first block, run as it is with the address, token and documents put
    in; the client's README and the project's show the same block. Run again with a source the
    API refuses, the snippet prints the refusal with its code (and the rest goes on)."""
    docs = _snippet(REPO / "docs" / "client.md")
    assert _snippet(REPO / "clients" / "python" / "README.md") == docs
    assert _snippet(REPO / "README.md") == docs
    fleet.start_worker()
    copies = {}
    for sample in ("quarterly-report.docx", "launch-plan.pptx", PDF_SAMPLE):
        copies[sample] = fleet.folder / sample
        copies[sample].write_bytes(example(sample).read_bytes())
    http_source.serve("/x.html", example("handbook.html").read_bytes(), content_type="text/html")
    filled = docs
    for placeholder, value in {
        '"http://doclane:8080"': repr(fleet.url),
        'token="..."': f"token={fleet.tokens['admin']!r}",
        '"report.docx"': repr(str(copies["quarterly-report.docx"])),
        '"slides.pptx"': repr(str(copies["launch-plan.pptx"])),
        '"s3://docs/in/a.pdf"': repr(str(copies[PDF_SAMPLE])),  # a path the server reads
        '"https://example.org/x.html"': repr(http_source.url("/x.html")),
    }.items():
        assert placeholder in filled, placeholder
        filled = filled.replace(placeholder, value)
    scope: dict[str, Any] = {}
    exec(compile(filled, "docs/client.md", "exec"), scope)
    jobs = scope["jobs"]
    assert len(jobs) == 4 and not jobs.rejected
    with fleet.client() as dl:
        assert {dl.job(job).job.state for job in jobs} == {"succeeded"}
        assert "Regional Outlook" in dl.result(jobs[2], "md")
        assert '"hierarchical"' in dl.result(jobs[0], "chunks")

    capsys.readouterr()
    missing = str(fleet.folder / "gone.pdf")  # refused at submission: E101, no job
    refusing = filled.replace(repr(str(copies[PDF_SAMPLE])), repr(missing))
    exec(compile(refusing, "docs/client.md", "exec"), scope)
    assert len(scope["jobs"]) == 3 and [r.code for r in scope["jobs"].rejected] == ["E101"]
    assert f"{missing} E101 " in capsys.readouterr().out
