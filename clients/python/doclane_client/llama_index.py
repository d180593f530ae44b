"""LlamaIndex: ``DoclaneReader``, a ``BaseReader`` that converts documents through doclane.

::

    from doclane_client.llama_index import DoclaneReader

    reader = DoclaneReader(url="http://doclane:8080", token="...", to="chunks")
    documents = reader.load_data(["report.docx", "https://example.org/x.html"])

The same contract as the LangChain loader (:mod:`doclane_client.langchain`): one Document per
document or per chunk, the same metadata, ``on_error`` raise or skip; each Document's id is the
job's id (``<job id>:<chunk index>`` for a chunk), so loading again replaces rather than adds.
Needs the extra: ``pip install './clients/python[llama-index]'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

try:
    from llama_index.core.readers.base import BaseReader
    from llama_index.core.schema import Document
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "doclane_client.llama_index needs llama-index-core: "
        "pip install 'doclane-client[llama-index]'"
    ) from exc

from doclane_client._loading import Loaded, LoadFormat, LoadSpec, OnError
from doclane_client._plans import PathOrSource
from doclane_client.client import AsyncClient, Client


class DoclaneReader(BaseReader):
    """Documents converted by doclane, as LlamaIndex ``Document`` s (see the module)."""

    def __init__(
        self,
        *,
        url: str,
        token: str | None = None,
        to: LoadFormat = "md",
        on_error: OnError = "raise",
        timeout: float | None = None,
        options: dict[str, Any] | None = None,
        client: dict[str, Any] | None = None,
    ) -> None:
        self.asked: dict[str, Any] = dict(
            to=to, on_error=on_error, timeout=timeout, options=options
        )
        LoadSpec.of((), **self.asked)  # the arguments checked now, not at the first load
        self.url, self.token, self.client = url, token, dict(client or {})

    def lazy_load_data(
        self, paths_or_sources: PathOrSource | Iterable[PathOrSource], **_: Any
    ) -> Iterator[Document]:
        with Client(self.url, self.token, **self.client) as dl:
            for record in dl.load(LoadSpec.of(paths_or_sources, **self.asked)):
                yield _document(record)

    async def alazy_load_data(
        self, paths_or_sources: PathOrSource | Iterable[PathOrSource], **_: Any
    ) -> list[Document]:
        """Every Document, loaded on ``AsyncClient`` (the base class's contract: a coroutine
        whose value is the documents)."""
        async with AsyncClient(self.url, self.token, **self.client) as dl:
            return [
                _document(r) async for r in dl.load(LoadSpec.of(paths_or_sources, **self.asked))
            ]

    async def aload_data(
        self, paths_or_sources: PathOrSource | Iterable[PathOrSource], **_: Any
    ) -> list[Document]:
        return await self.alazy_load_data(paths_or_sources)


def _document(record: Loaded) -> Document:
    return Document(id_=record.key, text=record.text, metadata=record.metadata)
