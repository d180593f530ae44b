"""Many small documents in one call: docling-mcp's directory tool, and proof of which is which.

Each ``convert_document_into_docling_document`` call builds a new converter and collects
garbage (0.2-0.5 s) for a document that converts in 20-40 ms; the directory tool pays that once
per folder (shared/docling-mcp-facts.md section 8: 2.14 -> 21.35 docs/s). But it answers
document keys only, in the order it listed the folder, and silently skips files it cannot
convert, so neither the count nor the order says which key came from which file, and a future
server may answer in completion order.

The proof: ``save_docling_document`` writes each key's Docling JSON, whose ``origin.filename``
names the file it was converted from. The folder holds each document under its own name, names
unique within the batch, so a name is a document. A key whose JSON names no file of this batch
(a cache hit on the same content converted earlier under another name), or names one already
claimed, proves nothing: its file is left *unproven* and converted alone later, as is every
file the server skipped. The JSON is read anyway when the job wants Docling JSON, so for such
jobs the proof costs nothing; otherwise about 12 ms a document.
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
    """One document of a batch: its file name in the folder, and its size."""

    name: str
    size_bytes: int


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
            name = _origin_filename(text)
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


def _origin_filename(text: str) -> str | None:
    try:
        origin = json.loads(text).get("origin") or {}
    except (ValueError, AttributeError):
        return None
    name = origin.get("filename") if isinstance(origin, dict) else None
    return name if isinstance(name, str) else None
