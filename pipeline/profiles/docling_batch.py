"""Many small documents in one call: docling-mcp's directory tool, and proof of which is which.

Each ``convert_document_into_docling_document`` call builds a new converter and collects
garbage (0.2-0.5 s) for a document that converts in 20-40 ms; the directory tool pays that once
per folder (shared/docling-mcp-facts.md section 8: 2.14 -> 21.35 docs/s). But it answers
document keys only, in the order it listed the folder, and silently skips files it cannot
convert, so neither the count nor the order says which key came from which file, and a future
server may answer in completion order.

The proof: ``save_docling_document`` writes each key's Docling JSON, whose ``origin.filename``
names the file it was converted from and ``origin.binary_hash`` its content (docling keeps the
low 64 bits of the file's sha256). The folder holds each document under its own name, names
unique within the batch, so a name plus its content is a document. The content matters: on a
cache hit the server answers the document converted *first*, whose origin names the file it
had then, and that name may belong to another member of this batch (``a.docx`` converted
earlier; now ``b.docx`` has that content and a new ``a.docx`` does not): by name alone,
``a.docx``'s job would get ``b.docx``'s document. A key whose JSON names no file of this batch,
names one but carries another member's content, or names one already claimed, proves nothing:
its file is left *unproven* and converted alone later, as is every file the server skipped.
(Docling hashes Markdown after rendering it to HTML, so for Markdown the hash is no member's
content and the name alone decides, as it did for every format before.) The JSON is read
anyway when the job wants Docling JSON, so for such jobs the proof costs nothing; otherwise
about 12 ms for a small document, but seconds for a large table (the server writes the whole
document as markdown and JSON: docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from errors import PipelineError
from pipeline.profiles.base import (
    Conversion,
    ConversionRequest,
    McpCallRecord,
    ToolClient,
    call_tool,
    require_str,
    structured,
)
from pipeline.profiles.docling_mcp import (
    CHECK_CACHE,
    CONVERT,
    EXPORT_MARKDOWN,
    SAVE,
    DoclingMcpProfile,
    KeyVanished,
)

CONVERT_DIRECTORY = "convert_directory_files_into_docling_document"

#: Receives each call and the member file it concerns (None: the whole batch).
BatchReporter = Callable[[McpCallRecord, "str | None"], None]


@dataclass(frozen=True, slots=True)
class BatchMember:
    """One document of a batch: its file name in the folder, its size and content sha256."""

    name: str
    size_bytes: int
    #: Hex sha256 of the file; None: the proof checks the name only (callers that know it pass it).
    sha256: str | None = None


@dataclass(slots=True)
class BatchConversion:
    """Per member name, what became of it."""

    converted: dict[str, Conversion] = field(default_factory=dict)
    #: Files the server skipped, or whose key could not be proven theirs: converted alone.
    unproven: list[str] = field(default_factory=list)
    keys: int = 0


class DoclingBatchProfile:
    """The directory tool plus the single-document profile's exports."""

    name = "docling-mcp-batch"

    def __init__(self, single: DoclingMcpProfile) -> None:
        self.single = single

    @staticmethod
    def fits(tool_names: frozenset[str]) -> bool:
        return {CONVERT_DIRECTORY, CONVERT, EXPORT_MARKDOWN, SAVE, CHECK_CACHE} <= tool_names

    def convert(
        self,
        client: ToolClient,
        folder: str,
        members: Sequence[BatchMember],
        formats: tuple[str, ...],
        report: BatchReporter,
        *,
        timeout: float,
    ) -> BatchConversion:
        """Convert every file of ``folder`` (the server's path) in one call, then prove and
        export each key. Raises only for trouble with the directory call itself."""
        result = call_tool(
            client,
            CONVERT_DIRECTORY,
            {"source": folder},
            stage="convert",
            report=lambda record: report(record, None),
            size_bytes=sum(m.size_bytes for m in members),
            timeout=timeout,
        )
        keys = _keys(structured(result, CONVERT_DIRECTORY))
        outcome = BatchConversion(keys=len(keys))
        by_name = {m.name: m for m in members}
        for key in dict.fromkeys(keys):  # a repeated key proves nothing more than once
            self._prove_and_export(
                client, key, by_name=by_name, formats=formats, report=report, outcome=outcome
            )
        outcome.unproven = [m.name for m in members if m.name not in outcome.converted]
        return outcome

    def _prove_and_export(
        self,
        client: ToolClient,
        key: str,
        *,
        by_name: dict[str, BatchMember],
        formats: tuple[str, ...],
        report: BatchReporter,
        outcome: BatchConversion,
    ) -> None:
        pending: list[McpCallRecord] = []  # calls made before the key's file is known
        request = ConversionRequest(source="", kind="file", suffix="", formats=formats)
        try:
            text = self.single.saved_json(client, key, request, pending.append)
        except (KeyVanished, PipelineError) as exc:
            if isinstance(exc, PipelineError) and exc.retryable:
                raise  # the server's trouble, not this key's: the batch's outcome
            name = None
        else:
            name = _proven_name(text, by_name)
        if name not in by_name or name in outcome.converted:
            for record in pending:
                report(record, None)
            return
        for record in pending:
            report(record, name)
        member = by_name[name]
        request = ConversionRequest(
            source="", kind="file", suffix="", formats=formats, size_bytes=member.size_bytes
        )
        outputs: dict[str, str] = {}
        try:
            for fmt in formats:
                if fmt == "md":
                    outputs["md"] = self.single.markdown(
                        client, key, request, lambda record: report(record, name)
                    )
                elif fmt == "json":
                    outputs["json"] = text
        except KeyVanished:
            return  # evicted before its export: it is converted alone
        except PipelineError as exc:
            if exc.retryable:
                raise
            return  # this document's export failed: converted alone, it gets its own error
        outcome.converted[name] = Conversion(profile=self.name, outputs=outputs, document_key=key)


def _keys(data: Any) -> list[str]:
    items = data.get("result") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [
        require_str(item, "document_key", CONVERT_DIRECTORY)
        for item in items
        if isinstance(item, dict)
    ]


def _proven_name(text: str, by_name: dict[str, BatchMember]) -> str | None:
    """The member this saved JSON proves: its origin names it, and no other member's content.

    ``origin.binary_hash`` is the converted file's content for most formats, so it must then be
    the named member's; a hash that is another member's content is a cache hit first converted
    under this name (the module docstring). Docling hashes some inputs after a transformation
    (Markdown: the HTML it renders), so a hash that is no member's content leaves the name alone
    to decide, as before this check existed.
    """
    try:
        origin = json.loads(text).get("origin") or {}
    except (ValueError, AttributeError):
        return None
    if not isinstance(origin, dict):
        return None
    name = origin.get("filename")
    member = by_name.get(name) if isinstance(name, str) else None
    if member is None:
        return None
    found = origin.get("binary_hash")
    if member.sha256 is not None and found == binary_hash(member.sha256):
        return member.name
    others = {binary_hash(m.sha256) for m in by_name.values() if m.sha256 is not None}
    if found in others:
        return None  # another member's content, under this member's name
    return member.name


def binary_hash(sha256_hex: str) -> int:
    """Docling's ``origin.binary_hash`` of a file: the low 64 bits of its sha256."""
    return int(sha256_hex, 16) & 0xFFFF_FFFF_FFFF_FFFF
