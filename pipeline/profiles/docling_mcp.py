"""The ``docling-mcp`` profile: the real server's two-step contract.

``convert_document_into_docling_document{source}`` gives a ``document_key``; the document then
lives in the server process's LRU cache (10 documents by default), from which
``export_docling_document_to_markdown`` and ``save_docling_document`` read it. Under load another
conversion can evict the key between the two calls, and the server then answers ``isError``
with no useful text. So an export that fails is followed by ``check_document_in_local_cache``:
if the key is gone, the document is converted again, once; if it is still there, the export
really failed (E307). A key gone twice means the server's cache is too small for the fleet:
E302, retried later like any overloaded server.

Docling JSON has no export tool: ``save_docling_document`` writes ``<key>.json`` into the
server's cache folder and returns its path on the server. It is offered only when
``DOCLANE_SERVER_CACHE_DIR`` tells where the worker can read that folder, and read only up to
``DOCLANE_MCP_MAX_REPLY_BYTES`` (E312 past it, checked before reading and while reading).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePath

from errors import ExportFailed, ReplyTooLarge, ServerUnavailable
from pipeline.profiles.base import (
    Conversion,
    ConversionRequest,
    KeptDocument,
    ToolCalls,
    ToolResultView,
    refuse_options,
    require_str,
    structured,
    text_of,
)

CONVERT = "convert_document_into_docling_document"
EXPORT_MARKDOWN = "export_docling_document_to_markdown"
SAVE = "save_docling_document"
CHECK_CACHE = "check_document_in_local_cache"


class KeyVanished(Exception):
    """The server no longer holds the document key (evicted or restarted)."""

    def __init__(self, tool: str, server_text: str) -> None:
        super().__init__(tool)
        self.tool = tool
        self.server_text = server_text


class DoclingMcpProfile:
    """Convert once, export every wanted format from the cached document."""

    name = "docling-mcp"
    takes_options = False

    def __init__(
        self,
        *,
        server_cache_dir: Path | None = None,
        to_worker_path: Callable[[str], str] | None = None,
        offers_save: bool = True,
        offers_check: bool = True,
        max_saved_bytes: int = 128 * 1024 * 1024,
    ) -> None:
        self._cache_dir = server_cache_dir
        self._max_saved_bytes = max_saved_bytes
        self._to_worker_path = to_worker_path or (lambda path: path)
        self._offers_save = offers_save
        self._offers_check = offers_check

    @classmethod
    def for_tools(
        cls,
        tool_names: frozenset[str],
        *,
        server_cache_dir: Path | None = None,
        to_worker_path: Callable[[str], str] | None = None,
        max_saved_bytes: int = 128 * 1024 * 1024,
    ) -> DoclingMcpProfile:
        return cls(
            server_cache_dir=server_cache_dir,
            to_worker_path=to_worker_path,
            offers_save=SAVE in tool_names,
            offers_check=CHECK_CACHE in tool_names,
            max_saved_bytes=max_saved_bytes,
        )

    @staticmethod
    def fits(tool_names: frozenset[str]) -> bool:
        return {CONVERT, EXPORT_MARKDOWN} <= tool_names

    @property
    def reads_saved_json(self) -> bool:
        """Whether this worker can read what ``save_docling_document`` writes."""
        return self._cache_dir is not None and self._offers_save

    @staticmethod
    def concurrency(endpoint: str) -> int:
        """One. In local mode docling-mcp builds a new converter for every call and converts
        in Python under one interpreter lock: two calls at once take as long as one after the
        other, or longer (four at once: 3.19 s against 2.8 s for the same four in a row), and
        on a quiet machine a round of them through one server was 0.87x the direct calls where
        one at a time was 1.00x (docs/benchmarks.md, *Rounds fitted to the server*, also has
        what a machine loaded by other work does instead)."""
        return 1

    def missing_formats(self, formats: Sequence[str]) -> list[str]:
        can = {"md"}
        if self._cache_dir is not None and self._offers_save:
            can.add("json")
        return [fmt for fmt in formats if fmt not in can]

    def convert(
        self, calls: ToolCalls, request: ConversionRequest, kept: KeptDocument | None = None
    ) -> Conversion:
        refuse_options(self.name, request.options)
        if kept is not None and isinstance(kept.document, str):
            key = kept.document
            conversion = Conversion(self.name, {}, document_key=key, conversions=0)
            conversion.notes.append(f"exported document key {key}, which an earlier try converted")
        else:
            key = self._convert(calls, request, kept)
            conversion = Conversion(profile=self.name, outputs={}, document_key=key)
        try:
            conversion.outputs = self._export_all(calls, key, request)
        except KeyVanished as gone:
            conversion.notes.append(f"document key {key} gone from the server; converted again")
            key = self._convert(calls, request, kept)
            conversion.document_key = key
            conversion.conversions += 1
            try:
                conversion.outputs = self._export_all(calls, key, request)
            except KeyVanished as again:
                # Not the document's fault: the server's cache holds fewer documents than the
                # fleet has in flight on it. Retried later (an overloaded server, as HTTP 429
                # is), and counted by its breaker, so that a fleet that keeps the cache
                # overflowing backs off.
                if kept is not None:
                    kept.document = None  # gone: the next try converts
                raise ServerUnavailable(
                    f"{again.tool}: document key vanished twice from the server's cache "
                    "(evicted by other conversions before its export; raise "
                    "DOCLING_MCP_CACHE_MAX_DOCUMENTS above the units the fleet has in flight)"
                    + (f" ({again.server_text})" if again.server_text else ""),
                    detail={"tool": again.tool, "first_tool": gone.tool, "document_key": key},
                ) from None
        return conversion

    def _convert(
        self, calls: ToolCalls, request: ConversionRequest, kept: KeptDocument | None
    ) -> str:
        """The document key of a new conversion, kept for the attempt's next try."""
        result = calls.call(
            CONVERT, {"source": request.source}, stage="convert", size_bytes=request.size_bytes
        )
        key = require_str(structured(result, CONVERT), "document_key", CONVERT)
        if kept is not None:
            kept.document = key
        return key

    def _export_all(self, calls: ToolCalls, key: str, request: ConversionRequest) -> dict[str, str]:
        outputs: dict[str, str] = {}
        for fmt in request.formats:
            if fmt == "md":
                outputs["md"] = self.markdown(calls, key, request)
            elif fmt == "json":
                outputs["json"] = self._json(calls, key, request)
        return outputs

    def markdown(self, calls: ToolCalls, key: str, request: ConversionRequest) -> str:
        """The markdown of a converted ``key``; ``KeyVanished`` when the server lost it."""
        result = self._export_call(calls, EXPORT_MARKDOWN, key, request)
        return require_str(structured(result, EXPORT_MARKDOWN), "markdown", EXPORT_MARKDOWN)

    def _json(self, calls: ToolCalls, key: str, request: ConversionRequest) -> str:
        return self.saved_json(calls, key, request)

    def saved_json(self, calls: ToolCalls, key: str, request: ConversionRequest) -> str:
        """The Docling JSON of ``key``, saved by the server and read from its cache folder."""
        server_path, local = self.save(calls, key, request)
        try:
            return self._read_saved(local)
        except OSError as exc:
            raise unreadable(server_path, local, exc) from exc

    def save(self, calls: ToolCalls, key: str, request: ConversionRequest) -> tuple[str, Path]:
        """Have the server save ``key``'s Docling JSON: its path there, and where the worker
        can read it."""
        assert self._cache_dir is not None  # missing_formats() refused json otherwise
        result = self._export_call(calls, SAVE, key, request)
        server_path = require_str(structured(result, SAVE), "json_file", SAVE)
        return server_path, self._readable_path(server_path)

    @property
    def max_saved_bytes(self) -> int:
        return self._max_saved_bytes

    def _read_saved(self, path: Path) -> str:
        """The saved file's text, never reading past the bound (the file may still grow)."""
        limit = self._max_saved_bytes
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(limit + 1) if size <= limit else b""
        size = max(size, len(data))
        if size > limit:
            raise ReplyTooLarge(
                f"{SAVE}: {path.name} holds {size} bytes, more than {limit} "
                "(DOCLANE_MCP_MAX_REPLY_BYTES)",
                detail={"tool": SAVE, "limit_bytes": limit, "size_bytes": size},
            )
        return data.decode("utf-8")

    def _readable_path(self, server_path: str) -> Path:
        """Where the worker reads a file the server wrote into its cache folder.

        The path map is tried first; a server path it does not cover (the cache folder is often
        mounted somewhere else) is looked up by name in the configured cache folder. Either way
        the result must lie inside that folder: the server does not get to name other files.
        """
        assert self._cache_dir is not None
        root = self._cache_dir.resolve()
        mapped = Path(self._to_worker_path(server_path)).resolve()
        if mapped.is_relative_to(root):
            return mapped
        return root / PurePath(server_path).name

    def _export_call(
        self, calls: ToolCalls, tool: str, key: str, request: ConversionRequest
    ) -> ToolResultView:
        result = calls.call(
            tool,
            {"document_key": key},
            stage="export",
            size_bytes=request.size_bytes,
            raise_on_error=False,
        )
        if not result.is_error:
            return result
        server_text = text_of(result)
        if not self._key_in_cache(calls, key):
            raise KeyVanished(tool, server_text)
        raise ExportFailed(
            f"{tool}: {server_text or 'the server reported an error'}",
            detail={"tool": tool, "document_key": key, "tool_text": server_text},
        )

    def _key_in_cache(self, calls: ToolCalls, key: str) -> bool:
        """Whether the server still holds ``key``; without the check tool, assume it does not."""
        if not self._offers_check:
            return False
        result = calls.call(CHECK_CACHE, {"document_key": key}, stage="export")
        return structured(result, CHECK_CACHE).get("in_cache") is True


def unreadable(server_path: str, local: Path, exc: OSError) -> ExportFailed:
    """The server saved a file the worker cannot read: a configuration problem, said so."""
    return ExportFailed(
        f"{SAVE}: the server saved {server_path}, but the worker cannot read it at {local} "
        f"({exc.strerror or exc}); check DOCLANE_SERVER_CACHE_DIR and DOCLANE_PATH_MAP",
        detail={"tool": SAVE, "server_path": server_path, "worker_path": str(local)},
    )
