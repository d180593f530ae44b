"""LangChain: ``DoclaneLoader``, a ``BaseLoader`` that converts documents through doclane.

::

    from doclane_client.langchain import DoclaneLoader

    loader = DoclaneLoader(["report.docx", "https://example.org/x.html"],
                           url="http://doclane:8080", token="...", to="chunks")
    for doc in loader.lazy_load():      # one Document per document, or per chunk
        print(doc.metadata["source"], doc.metadata["job_id"], doc.page_content[:80])

Local files are uploaded; anything else (a URL, ``s3://``, a path on the server) is sent as a
source. ``alazy_load`` does the same on ``AsyncClient``. Needs the extra:
``pip install './clients/python[langchain]'``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

try:
    from langchain_core.document_loaders import BaseLoader
    from langchain_core.documents import Document
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "doclane_client.langchain needs langchain-core: pip install 'doclane-client[langchain]'"
    ) from exc

from doclane_client._loading import Loaded, LoadFormat, LoadSpec, OnError
from doclane_client._plans import PathOrSource
from doclane_client.client import AsyncClient, Client


class DoclaneLoader(BaseLoader):
    """Documents converted by doclane, as LangChain ``Document`` s.

    ``to="md"``: one Document per converted document; ``to="chunks"``: one per chunk. Metadata:
    ``source``, ``job_id``, ``format``, ``engine`` and ``pages`` when known (and a chunk's
    ``chunk_index``, ``headings``). A failed document raises (``on_error="raise"``, its
    ``DoclaneError``) or is skipped with a warning (``"skip"``). ``client`` options go to the
    ``Client`` (``retries``, ``polling``, ``timeout``, httpx's ``transport`` ...)."""

    def __init__(
        self,
        paths_or_sources: PathOrSource | Iterable[PathOrSource],
        *,
        url: str,
        token: str | None = None,
        to: LoadFormat = "md",
        on_error: OnError = "raise",
        timeout: float | None = None,
        options: dict[str, Any] | None = None,
        client: dict[str, Any] | None = None,
    ) -> None:
        self.spec = LoadSpec.of(
            paths_or_sources, to=to, on_error=on_error, timeout=timeout, options=options
        )
        self.url, self.token, self.client = url, token, dict(client or {})

    def lazy_load(self) -> Iterator[Document]:
        with Client(self.url, self.token, **self.client) as dl:
            for record in dl.load(self.spec):
                yield _document(record)

    async def alazy_load(self) -> AsyncIterator[Document]:
        async with AsyncClient(self.url, self.token, **self.client) as dl:
            async for record in dl.load(self.spec):
                yield _document(record)


def _document(record: Loaded) -> Document:
    return Document(id=record.key, page_content=record.text, metadata=record.metadata)
