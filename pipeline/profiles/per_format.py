"""The ``per-format`` profile: the design seed's eight-tool contract.

One convert tool per input type (``convert_pdf``, ``convert_docx``, ``convert_xlsx``,
``convert_pptx`` take ``file_path``; ``convert_url`` takes ``url``) answers with the Docling
document itself; ``export_markdown``, ``export_html`` and ``export_json`` take that ``document``
back and answer with the text. Nothing is cached on the server between the calls, so there is no
key to lose; the price is that the document travels twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from errors import MissingCapability
from pipeline.profiles.base import (
    Conversion,
    ConversionRequest,
    KeptDocument,
    ToolCalls,
    ToolResultView,
    refuse_options,
    structured,
    text_of,
)

CONVERT_BY_SUFFIX: Mapping[str, str] = {
    ".pdf": "convert_pdf",
    ".docx": "convert_docx",
    ".xlsx": "convert_xlsx",
    ".pptx": "convert_pptx",
}
CONVERT_URL = "convert_url"
EXPORT_BY_FORMAT: Mapping[str, str] = {
    "md": "export_markdown",
    "html": "export_html",
    "json": "export_json",
}
#: The keys an export answer may carry its text under, most specific first.
_TEXT_KEYS: Mapping[str, tuple[str, ...]] = {
    "md": ("markdown", "content", "text"),
    "html": ("html", "content", "text"),
    "json": ("json", "document", "content", "text"),
}
TOOLS: frozenset[str] = frozenset(
    {*CONVERT_BY_SUFFIX.values(), CONVERT_URL, *EXPORT_BY_FORMAT.values()}
)


class PerFormatProfile:
    """Pick the convert tool by the document's type, then export each format from the document."""

    name = "per-format"
    takes_options = False

    def __init__(self, tool_names: frozenset[str] = TOOLS) -> None:
        self._tools = tool_names

    @staticmethod
    def fits(tool_names: frozenset[str]) -> bool:
        has_convert = any(tool in tool_names for tool in (*CONVERT_BY_SUFFIX.values(), CONVERT_URL))
        return has_convert and "export_markdown" in tool_names

    @staticmethod
    def concurrency(endpoint: str) -> None:
        """Not told: the contract names no such figure (``DOCLANE_SERVER_CONCURRENCY`` does)."""
        return None

    def missing_formats(self, formats: Sequence[str]) -> list[str]:
        return [fmt for fmt in formats if EXPORT_BY_FORMAT.get(fmt) not in self._tools]

    def convert_tool(self, request: ConversionRequest) -> str:
        """The convert tool for this document; E305 when the server has none for its type."""
        tool = CONVERT_URL if request.kind == "url" else CONVERT_BY_SUFFIX.get(request.suffix)
        if tool is None or tool not in self._tools:
            kind = "URLs" if request.kind == "url" else f"{request.suffix or 'untyped'} files"
            raise MissingCapability(
                f"the server's per-format tools cannot convert {kind}",
                detail={"profile": self.name, "suffix": request.suffix, "kind": request.kind},
            )
        return tool

    def convert(
        self, calls: ToolCalls, request: ConversionRequest, kept: KeptDocument | None = None
    ) -> Conversion:
        refuse_options(self.name, request.options)
        conversion = Conversion(profile=self.name, outputs={})
        if kept is not None and kept.document is not None:
            # The document travels in each export's arguments: what an earlier try's convert
            # gave is as good now.
            document = kept.document
            conversion.conversions = 0
            conversion.notes.append("exported the document an earlier try converted")
        else:
            document = self._convert(calls, request)
            if kept is not None:
                kept.document = document
        outputs: dict[str, str] = {}
        for fmt in request.formats:
            export = EXPORT_BY_FORMAT[fmt]
            exported = calls.call(
                export, {"document": document}, stage="export", size_bytes=request.size_bytes
            )
            outputs[fmt] = _text_for(exported, fmt)
        conversion.outputs = outputs
        return conversion

    def _convert(self, calls: ToolCalls, request: ConversionRequest) -> Any:
        """The Docling document the type's convert tool gives."""
        tool = self.convert_tool(request)
        argument = "url" if tool == CONVERT_URL else "file_path"
        result = calls.call(
            tool, {argument: request.source}, stage="convert", size_bytes=request.size_bytes
        )
        return _document_of(structured(result, tool))


def _document_of(content: Mapping[str, Any]) -> Any:
    """The Docling document in a convert answer (wrapped under ``document`` or bare)."""
    inner = content.get("document")
    return inner if isinstance(inner, Mapping) else dict(content)


def _text_for(result: ToolResultView, fmt: str) -> str:
    content = result.raw.get("structuredContent")
    if isinstance(content, Mapping):
        for key in _TEXT_KEYS[fmt]:
            value = content.get(key)
            if isinstance(value, str):
                return value
            if value is not None and fmt == "json":
                return json.dumps(value, ensure_ascii=False)
    return text_of(result)
