"""What the RAG loaders do, written once: submit, wait, and turn each result into records.

``load`` is a feed (:mod:`doclane_client._core`), so the LangChain loader and the LlamaIndex
reader, sync and async, all run this one plan and differ only in the class they wrap a
:class:`Loaded` in. A record is one converted document (``to="md"``) or one chunk
(``to="chunks"``), with metadata: ``source`` (the path or source as given), ``job_id``,
``format``, ``engine`` (the server's engine that made the result, when it said), and ``pages``
when known (a chunk's pages, or the page range the job was asked for).

A document that fails (refused at submission, or its job failed or was cancelled) raises as
its :class:`DoclaneError` with ``on_error="raise"``; with ``"skip"`` it is left out with a
warning naming it and its code.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from doclane_client._core import Core, Emit, Feed
from doclane_client._plans import Asked, PathOrSource, Polling, Waiter, get_job, result, submit_any
from doclane_client.errors import DoclaneError, InvalidInput, JobFailed
from doclane_client.models import Job, JobDetail, JobState

LoadFormat = Literal["md", "chunks"]
OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class Loaded:
    """One document, or one chunk of one, as text with its metadata."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A stable id: the job's, and the chunk's index for a chunk (loading the same job again
        gives the same ids, so an index replaces rather than adds)."""
        key = str(self.metadata["job_id"])
        if "chunk_index" in self.metadata:
            key = f"{key}:{self.metadata['chunk_index']}"
        return key


@dataclass(frozen=True)
class LoadSpec:
    """What a loader was asked: its documents, the format, and what to do about failures."""

    items: tuple[PathOrSource, ...]
    to: LoadFormat = "md"
    on_error: OnError = "raise"
    timeout: float | None = None
    options: dict[str, Any] | None = None

    @classmethod
    def of(cls, items: PathOrSource | Iterable[PathOrSource], **asked: Any) -> LoadSpec:
        one = isinstance(items, str) or hasattr(items, "__fspath__")
        spec = cls(items=(items,) if one else tuple(items), **asked)  # type: ignore[arg-type]
        if spec.to not in ("md", "chunks"):
            raise ValueError(f'to must be "md" or "chunks", not {spec.to!r}')
        if spec.on_error not in ("raise", "skip"):
            raise ValueError(f'on_error must be "raise" or "skip", not {spec.on_error!r}')
        return spec


def load(core: Core, spec: LoadSpec, polling: Polling) -> Feed[Loaded]:
    # Chunks name the document's items (``#/texts/3``), not pages: the Docling JSON beside
    # them says on which pages each item lies.
    formats = ["chunks", "json"] if spec.to == "chunks" else ["md"]
    asked = Asked(to=formats, options=spec.options)
    submission = yield from submit_any(core, spec.items, asked)
    for refused in submission.rejected:
        _failed(spec, InvalidInput(refused.code, f"{refused.source}: {refused.message}"))
    given = {job.id: job.source for job in submission}
    waiter = Waiter(submission, spec.timeout, polling)
    while waiter.pending:
        for job in (yield from waiter.ended(core)):
            if job.state is not JobState.SUCCEEDED:
                _failed(spec, _job_failed(job, given[str(job.id)]))
                continue
            detail = yield from get_job(core, job.id)
            answer = yield from result(core, job.id, spec.to)
            document: Any = None
            if spec.to == "chunks":
                document = json.loads((yield from result(core, job.id, "json")).content)
            base = _metadata(detail, given[str(job.id)], spec.to)
            for record in records(answer.content.decode("utf-8"), spec.to, base, document):
                yield Emit(record)


def records(text: str, fmt: LoadFormat, base: dict[str, Any], document: Any = None) -> list[Loaded]:
    """The result's records: the whole text, or one per chunk of a chunks result (with the
    pages its items lie on, looked up in the Docling ``document`` when there is one)."""
    if fmt == "md":
        return [Loaded(text, dict(base))]
    chunks = _chunk_list(json.loads(text))
    found = []
    for index, chunk in enumerate(chunks):
        metadata = {**base, "chunk_index": index}
        pages = sorted(_pages(chunk.get("doc_items") or [], document))
        if pages:
            metadata["pages"] = pages
        headings = chunk.get("headings") or (chunk.get("meta") or {}).get("headings")
        if headings:
            metadata["headings"] = list(headings)
        found.append(Loaded(str(chunk.get("text", "")), metadata))
    return found


def _chunk_list(document: Any) -> list[dict[str, Any]]:
    """The chunk records of a chunks result: docling-rs writes ``{"hierarchical": [...]}``;
    a bare list is taken as it is."""
    if isinstance(document, list):
        return [c for c in document if isinstance(c, dict)]
    if isinstance(document, dict):
        for key in ("hierarchical", "chunks"):
            if isinstance(document.get(key), list):
                return [c for c in document[key] if isinstance(c, dict)]
    raise DoclaneError("bad_result", "the chunks result holds no list of chunk records")


def _pages(items: list[Any], document: Any) -> set[int]:
    """The pages (``prov[].page_no``) of the Docling items a chunk names, by JSON pointer
    (``"#/texts/3"``, or ``{"$ref": ...}``); none without the document."""
    found: set[int] = set()
    for item in items:
        pointer = item.get("$ref") if isinstance(item, dict) else item
        node = _resolve(document, pointer) if isinstance(pointer, str) else None
        for prov in (node or {}).get("prov") or []:
            if isinstance(prov, dict) and isinstance(prov.get("page_no"), int):
                found.add(prov["page_no"])
    return found


def _resolve(document: Any, pointer: str) -> dict[str, Any] | None:
    node = document
    for part in pointer.removeprefix("#").strip("/").split("/"):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node if isinstance(node, dict) else None


def _metadata(detail: JobDetail, source: str, fmt: str) -> dict[str, Any]:
    job = detail.job
    metadata: dict[str, Any] = {"source": source, "job_id": str(job.id), "format": fmt}
    engine = next((r.engine for r in detail.results if r.format == fmt and r.engine), None)
    if engine:
        metadata["engine"] = engine
    if job.options.get("pages"):
        metadata["pages"] = str(job.options["pages"])
    return metadata


def _job_failed(job: Job, source: str) -> JobFailed:
    failed = JobFailed(str(job.id), job.state.value, job.error_code, job.error_message)
    failed.detail = {"source": source}
    return failed


def _failed(spec: LoadSpec, error: DoclaneError) -> None:
    if spec.on_error == "raise":
        raise error
    warnings.warn(f"doclane: skipped a document: {error}", stacklevel=3)
