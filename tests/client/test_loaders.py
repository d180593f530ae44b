"""The RAG loaders with the real langchain-core and llama-index-core, on a real fleet: one
Document per document (the fake MCP server's markdown) or per chunk (the real docling-rs-mcp),
their metadata, failures raised or skipped, sync and async."""

from __future__ import annotations

import pytest
from doclane_client import InvalidInput, JobFailed
from doclane_client.langchain import DoclaneLoader
from doclane_client.llama_index import DoclaneReader
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document as LangChainDocument
from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import Document as LlamaDocument

from tests.fixtures.http_source import HttpSource
from tests.support.client_fleet import FAST, Fleet


def _options(fleet: Fleet, role: str = "submit") -> dict[str, object]:
    return {"url": fleet.url, "token": fleet.tokens[role], "client": dict(FAST)}


def test_langchain_loader_one_document_per_document(fleet: Fleet, http_source: HttpSource) -> None:
    http_source.serve("/web.md", b"# Web page\n\nFrom a URL.\n", content_type="text/markdown")
    files = [fleet.document("alpha.md"), fleet.document("beta.md")]
    fleet.start_worker()
    loader = DoclaneLoader([*files, http_source.url("/web.md")], **_options(fleet))
    assert isinstance(loader, BaseLoader)
    documents = list(loader.lazy_load())
    assert all(isinstance(d, LangChainDocument) for d in documents)
    by_source = {d.metadata["source"]: d for d in documents}
    assert set(by_source) == {*map(str, files), http_source.url("/web.md")}
    alpha = by_source[str(files[0])]
    assert "About alpha.md" in alpha.page_content
    assert alpha.metadata["format"] == "md" and alpha.id == alpha.metadata["job_id"]
    assert "From a URL" in by_source[http_source.url("/web.md")].page_content


@pytest.mark.anyio
async def test_langchain_alazy_load(fleet: Fleet) -> None:
    fleet.start_worker()
    loader = DoclaneLoader(fleet.document("async.md"), **_options(fleet))
    documents = [d async for d in loader.alazy_load()]
    assert [d.metadata["source"] for d in documents] == [str(fleet.folder / "async.md")]
    assert "About async.md" in documents[0].page_content


def test_a_failed_document_raises_or_is_skipped(fleet: Fleet) -> None:
    good, empty = fleet.document("good.md"), fleet.document("empty.md", "")
    doomed = fleet.document("doomed.md")
    fleet.start_worker()
    with pytest.raises(InvalidInput) as refused:
        list(DoclaneLoader([good, empty], **_options(fleet)).lazy_load())
    assert refused.value.code == "E106"

    with pytest.warns(UserWarning, match="E106"):
        kept = list(DoclaneLoader([good, empty], on_error="skip", **_options(fleet)).lazy_load())
    assert [d.metadata["source"] for d in kept] == [str(good)]

    reader = DoclaneReader(**_options(fleet))
    sources = [str(doomed)]
    doomed.unlink()  # a path the server checks at submission: gone, refused there (E101)
    with pytest.raises(InvalidInput):
        reader.load_data(sources)
    with pytest.raises(ValueError, match="on_error"):
        DoclaneReader(on_error="ignore", **_options(fleet))  # type: ignore[arg-type]


def test_a_job_that_fails_at_the_worker(fleet: Fleet) -> None:
    fleet.server.configure(fail_next=-1, fail_with="is_error")  # every conversion fails
    fleet.start_worker()
    with pytest.raises(JobFailed) as failed:
        list(DoclaneLoader(fleet.document("fails.md"), **_options(fleet)).lazy_load())
    assert failed.value.state == "failed" and failed.value.code.startswith("E3")
    assert failed.value.detail == {"source": str(fleet.folder / "fails.md")}

    loader = DoclaneLoader(fleet.document("fails-too.md"), on_error="skip", **_options(fleet))
    with pytest.warns(UserWarning, match="skipped a document"):
        assert list(loader.lazy_load()) == []


def test_llama_index_reader(fleet: Fleet) -> None:
    files = [fleet.document("one.md"), fleet.document("two.md")]
    fleet.start_worker()
    reader = DoclaneReader(**_options(fleet))
    assert isinstance(reader, BaseReader)
    documents = reader.load_data(files)
    assert all(isinstance(d, LlamaDocument) for d in documents)
    assert sorted(d.metadata["source"] for d in documents) == sorted(map(str, files))
    assert all(d.id_ == d.metadata["job_id"] for d in documents)
    assert any("About one.md" in d.text for d in documents)


@pytest.mark.anyio
async def test_llama_index_aload_data(fleet: Fleet) -> None:
    fleet.start_worker()
    documents = await DoclaneReader(**_options(fleet)).aload_data([fleet.document("a1.md")])
    assert [d.metadata["source"] for d in documents] == [str(fleet.folder / "a1.md")]
