"""The two tool sets the fake serves: ``docling`` (docling-mcp 3.3.0) and ``per-format`` (the seed).

``docling`` lists the real server's 21 tools with their schemas copied verbatim from a probe of
docling-mcp 3.3.0 (docling_mcp_3_3_0_tools.json), so clients validate against the real shapes.
It implements the conversion path: ``convert_document_into_docling_document{source}`` ->
``{from_cache, document_key}``, ``export_docling_document_to_markdown{document_key, max_size?}``
-> ``{document_key, markdown}``, ``save_docling_document{document_key}`` -> ``{md_file,
json_file}``, ``list_cached_documents``, ``check_document_in_local_cache`` and
``remove_document_from_local_cache``; the generation/manipulation tools answer
``isError`` like a failing real tool. Failures look like the real ones: ``isError: true`` with
only ``Error executing tool <name>``; bad arguments add the validation message; an unknown tool
gets ``Unknown tool: <name>``. Only local paths are converted (local mode refuses URLs).

``per-format`` is the seed's eight-tool contract. Its ``document`` is the converted Docling-like
JSON itself, not a key, so it keeps no server-side state:

* ``convert_pdf|convert_docx|convert_xlsx|convert_pptx{file_path, options?}`` and
  ``convert_url{url, options?}`` -> ``{"document": DoclingDocument}`` (the file's suffix must fit
  the tool; ``convert_url`` reads ``file://`` and ``http(s)://``);
* ``export_markdown{document, options?: {max_size?}}`` -> ``{"markdown": str}``,
  ``export_html{document, options?}`` -> ``{"html": str}``,
  ``export_json{document, options?}`` -> ``{"json": DoclingDocument}``.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import httpx
from jsonschema import Draft202012Validator

from tests.fakes import documents
from tests.fakes.documents import ConversionFailed, Document
from tests.fakes.state import FakeState

logger = logging.getLogger("fake_docling.tools")

DOCLING_TOOLS_FILE = Path(__file__).with_name("docling_mcp_3_3_0_tools.json")


class ToolFailed(Exception):
    """The tool failed; the client sees only ``Error executing tool <name>`` (cause logged)."""


def ok(structured: dict[str, Any]) -> dict[str, Any]:
    """A successful result shaped like the SDK's: the structure twice, as text and as object."""
    return {
        "content": [{"type": "text", "text": json.dumps(structured, indent=2)}],
        "structuredContent": structured,
        "isError": False,
    }


def failed(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


class Profile:
    """A list of tool definitions and the code behind them."""

    name = "profile"

    def __init__(self, state: FakeState, tools: list[dict[str, Any]]) -> None:
        self.state = state
        self.tools = tools
        self._by_name = {tool["name"]: tool for tool in tools}
        self._validators = {
            tool["name"]: Draft202012Validator(tool["inputSchema"]) for tool in tools
        }

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name not in self._by_name:
            return failed(f"Unknown tool: {name}")
        error = next(iter(self._validators[name].iter_errors(arguments)), None)
        if error is not None:
            return failed(f"Error executing tool {name}: 1 validation error: {error.message}")
        try:
            return ok(await self.run(name, arguments))
        except (ToolFailed, ConversionFailed, OSError, ValueError) as exc:
            logger.info("tool %s failed: %s", name, exc)
            return failed(f"Error executing tool {name}")

    async def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class DoclingProfile(Profile):
    name = "docling"

    def __init__(self, state: FakeState) -> None:
        super().__init__(state, json.loads(DOCLING_TOOLS_FILE.read_text())["tools"])

    async def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        cache = self.state.cache
        if name == "convert_document_into_docling_document":
            source = arguments["source"]
            if "://" in source:
                raise ToolFailed(f"URL is not allowed in local mode: {source}")
            document = documents.convert_file(Path(source))
            from_cache = cache.get(document.key) is not None
            if not from_cache:
                cache.put(document)
            return {"from_cache": from_cache, "document_key": document.key}
        if name == "convert_directory_files_into_docling_document":
            return {"result": self._convert_directory(Path(arguments["source"]))}
        if name == "export_docling_document_to_markdown":
            document = self._cached(arguments["document_key"])
            markdown = document.markdown
            if arguments.get("max_size") is not None:
                markdown = markdown[: arguments["max_size"]]
            return {"document_key": document.key, "markdown": markdown}
        if name == "save_docling_document":
            document = self._cached(arguments["document_key"])
            folder = Path(self.state.cache_dir)
            folder.mkdir(parents=True, exist_ok=True)
            md_file = folder / f"{document.key}.md"
            json_file = folder / f"{document.key}.json"
            md_file.write_text(document.markdown)
            json_file.write_text(json.dumps(documents.to_docling_json(document), indent=2))
            return {"md_file": str(md_file), "json_file": str(json_file)}
        if name == "list_cached_documents":
            return {"document_keys": cache.keys()}
        if name == "check_document_in_local_cache":
            return {"in_cache": cache.get(arguments["document_key"]) is not None}
        if name == "remove_document_from_local_cache":
            return {"dropped": cache.remove(arguments["document_key"])}
        raise ToolFailed(f"{name} is listed but not implemented by the fake")

    def _convert_directory(self, folder: Path) -> list[dict[str, Any]]:
        """Like docling-mcp 3.3.0: every file directly in the folder, in listing order; a file
        that fails is skipped without a word. Knobs: ``dir_skip`` (file names the server
        "cannot convert"), ``dir_order`` (answer in listed, reversed or shuffled order)."""
        if not folder.is_dir():
            raise ToolFailed(f"Not a directory: {folder}")
        knobs, cache = self.state.knobs, self.state.cache
        self.state.stats.directory_calls.append(str(folder))
        answers: list[dict[str, Any]] = []
        for path in folder.iterdir():
            if not path.is_file() or path.name in knobs.dir_skip:
                continue
            try:
                document = documents.convert_file(path)
            except ConversionFailed:
                continue
            from_cache = cache.get(document.key) is not None
            if not from_cache:
                cache.put(document)
                self.state.stats.directory_conversions += 1
            answers.append({"from_cache": from_cache, "document_key": document.key})
        if knobs.dir_order == "reversed":
            answers.reverse()
        elif knobs.dir_order == "shuffled":
            random.Random(knobs.dir_seed).shuffle(answers)
        return answers

    def _cached(self, key: str) -> Document:
        document = self.state.cache.get(key)
        if document is None:
            raise ToolFailed(f"document-key {key} is not found")
        return document


_DOCLING_DOCUMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "DoclingDocument",
    "properties": {
        "schema_name": {"const": "DoclingDocument"},
        "version": {"type": "string"},
        "name": {"type": "string"},
        "origin": {"type": "object"},
        "furniture": {"type": "object"},
        "body": {"type": "object"},
        "groups": {"type": "array"},
        "texts": {"type": "array"},
        "pictures": {"type": "array"},
        "tables": {"type": "array"},
    },
    "required": [
        "schema_name", "version", "name", "origin", "furniture", "body", "groups", "texts",
        "pictures", "tables",
    ],
    "additionalProperties": True,
}  # fmt: skip

_OPTIONS = {"type": "object", "description": "converter or exporter options", "default": {}}


def _tool(
    name: str, description: str, inputs: dict[str, Any], required: list[str], output: str
) -> dict[str, Any]:
    output_schema = (
        _DOCLING_DOCUMENT_SCHEMA if output in ("document", "json") else {"type": "string"}
    )
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": inputs, "required": required},
        "outputSchema": {
            "type": "object",
            "properties": {output: output_schema},
            "required": [output],
        },
    }


_FILE_TOOLS = {"convert_pdf": ".pdf", "convert_docx": ".docx", "convert_xlsx": ".xlsx",
               "convert_pptx": ".pptx"}  # fmt: skip


class PerFormatProfile(Profile):
    name = "per-format"

    def __init__(self, state: FakeState) -> None:
        file_input = {"file_path": {"type": "string", "minLength": 1}, "options": _OPTIONS}
        doc_input = {"document": _DOCLING_DOCUMENT_SCHEMA, "options": _OPTIONS}
        tools = [
            _tool(name, f"Convert a {suffix[1:].upper()} file into a Docling document.",
                  file_input, ["file_path"], "document")
            for name, suffix in _FILE_TOOLS.items()
        ]  # fmt: skip
        tools.append(
            _tool(
                "convert_url",
                "Convert the document at a URL into a Docling document.",
                {"url": {"type": "string", "format": "uri"}, "options": _OPTIONS},
                ["url"],
                "document",
            )
        )
        tools += [
            _tool("export_markdown", "Export a Docling document to Markdown.", doc_input,
                  ["document"], "markdown"),
            _tool("export_html", "Export a Docling document to HTML.", doc_input,
                  ["document"], "html"),
            _tool("export_json", "Export a Docling document to Docling JSON.", doc_input,
                  ["document"], "json"),
        ]  # fmt: skip
        super().__init__(state, tools)

    async def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name in _FILE_TOOLS:
            path = Path(arguments["file_path"])
            if path.suffix.lower() != _FILE_TOOLS[name]:
                raise ToolFailed(f"{name} cannot convert {path.name}")
            return {"document": documents.to_docling_json(documents.convert_file(path))}
        if name == "convert_url":
            return {"document": documents.to_docling_json(await _convert_url(arguments["url"]))}
        document = documents.from_docling_json(arguments["document"])
        options = arguments.get("options") or {}
        if name == "export_markdown":
            markdown = document.markdown
            if isinstance(options.get("max_size"), int):
                markdown = markdown[: options["max_size"]]
            return {"markdown": markdown}
        if name == "export_html":
            return {"html": documents.blocks_to_html(document.blocks, document.name)}
        if name == "export_json":
            return {"json": documents.to_docling_json(document)}
        raise ToolFailed(f"unknown per-format tool {name}")


async def _convert_url(url: str) -> Document:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return documents.convert_file(Path(unquote(parsed.path)))
    if parsed.scheme not in ("http", "https"):
        raise ToolFailed(f"unsupported URL scheme: {url}")
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.get(url)
    if response.status_code != 200:
        raise ToolFailed(f"GET {url} answered {response.status_code}")
    filename = Path(unquote(parsed.path)).name or "index.html"
    if Path(filename).suffix.lower() not in documents.SUPPORTED_SUFFIXES:
        content_type = response.headers.get("content-type", "text/html").split(";")[0].strip()
        filename += {"text/csv": ".csv", "text/markdown": ".md"}.get(content_type, ".html")
    return documents.convert_bytes(response.content, filename)


def make_profile(name: str, state: FakeState) -> Profile:
    if name == "docling":
        return DoclingProfile(state)
    if name == "per-format":
        return PerFormatProfile(state)
    raise ValueError(f"unknown profile {name!r}: docling or per-format")
