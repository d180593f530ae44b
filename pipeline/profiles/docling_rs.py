"""The ``docling-rs`` profile: docling.rs's MCP server (``docling-rs-mcp``), one call a format.

``convert{uri, to, options}`` answers with the whole output as one text block: Markdown,
Docling JSON, HTML, plain text or chunk records, whichever ``to`` names. Nothing is kept on the
server between calls (no document key to lose, no saved file to read back, no batch folder), so
each wanted format is one self-contained call. The job's conversion options (page range, OCR
language, text layer only, password) go in ``options`` as the server names them.

Two things make the Markdown equal docling's own: tables padded as docling pads them
(``compact_tables: false``, unless ``DOCLANE_COMPACT_TABLES`` says otherwise) and no final
newline (docling.rs ends every document with one, docling never does).

A failure is an ``isError`` result whose text says what went wrong; :func:`failure_for` turns
that text into the catalog's code (the text is kept in every case).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from errors import ConversionFailed, PipelineError, ServerCannotReach, UnsupportedFormat
from pipeline.mcp.endpoints import is_stdio
from pipeline.profiles.base import (
    Conversion,
    ConversionRequest,
    KeptDocument,
    ToolCalls,
    text_of,
)

CONVERT = "convert"
#: The tools that tell this server from the others (``convert`` alone is too common a name).
SIGNATURE: frozenset[str] = frozenset({CONVERT, "convert_to_markdown", "list_input_formats"})
#: doclane's format -> the server's ``to``.
TO_BY_FORMAT: Mapping[str, str] = {
    "md": "md",
    "json": "json",
    "html": "html",
    "text": "text",
    "chunks": "chunks",
}
#: Conversions docling-rs-mcp runs at once unless started with ``--concurrency N``.
DEFAULT_CONCURRENCY = 2

_UNSUPPORTED = re.compile(r"could not determine input format|unknown input format", re.I)
_OUT_OF_REACH = re.compile(
    r"outside the server's root|cannot open .*no such file|no such file or directory"
    r"|fetching urls is disabled",
    re.I,
)
_UNREADABLE = re.compile(r"^parse error:", re.I)


class DoclingRsProfile:
    """Ask the server once per wanted format; nothing to cache, save or prove."""

    name = "docling-rs"
    takes_options = True

    def __init__(self, *, compact_tables: bool = False) -> None:
        self._compact_tables = compact_tables

    @staticmethod
    def fits(tool_names: frozenset[str]) -> bool:
        return tool_names >= SIGNATURE

    @staticmethod
    def concurrency(endpoint: str) -> int:
        """The server's ``--concurrency`` (conversions running at once, up to which it does
        convert in parallel): as the command line of a child doclane starts says, else the
        server's default. Over HTTP nothing tells (neither its initialize nor its tools name
        the figure): a server started with another ``--concurrency`` needs
        ``DOCLANE_SERVER_CONCURRENCY``."""
        if not is_stdio(endpoint):
            return DEFAULT_CONCURRENCY
        return _concurrency_flag(shlex.split(endpoint.partition(":")[2]))

    def missing_formats(self, formats: Sequence[str]) -> list[str]:
        return [fmt for fmt in formats if fmt not in TO_BY_FORMAT]

    def arguments(self, request: ConversionRequest, fmt: str) -> dict[str, Any]:
        """The ``convert`` arguments for one format of one document."""
        options: dict[str, Any] = dict(request.options)
        if fmt == "md":
            options.setdefault("compact_tables", self._compact_tables)
        arguments: dict[str, Any] = {"uri": request.source, "to": TO_BY_FORMAT[fmt]}
        if options:
            arguments["options"] = options
        return arguments

    def convert(
        self, calls: ToolCalls, request: ConversionRequest, kept: KeptDocument | None = None
    ) -> Conversion:
        outputs: dict[str, str] = {}
        for fmt in request.formats:
            result = calls.call(
                CONVERT,
                self.arguments(request, fmt),
                stage="convert",
                size_bytes=request.size_bytes,
                raise_on_error=False,
            )
            if result.is_error:
                raise failure_for(text_of(result), request)
            text = text_of(result)
            outputs[fmt] = text[:-1] if fmt == "md" and text.endswith("\n") else text
        return Conversion(profile=self.name, outputs=outputs)


def failure_for(server_text: str, request: ConversionRequest) -> PipelineError:
    """The catalog error for the server's failure text, which every error keeps.

    An unreadable or corrupt document is E306 (final: the same bytes fail the same way); a type
    the server cannot read is E102; a document outside the server's roots, or missing at the
    path the server was given, is E315 (doclane read the file itself before asking, so the
    server's view of the disk is what differs). E315 names what to change: for doclane's own
    files (uploads, downloads) the inbox, ``DOCLANE_INBOX_DIR``, which every upload shares, not
    the folder of the one upload; for a file submitted from elsewhere, its folder. Anything
    else is E306 as the server worded it.
    """
    text = server_text.strip() or "the server reported an error without a message"
    detail: dict[str, Any] = {"tool": CONVERT, "tool_text": text[:2000]}
    if _UNSUPPORTED.search(text):
        return UnsupportedFormat(f"{CONVERT}: {text}", detail=detail)
    if _OUT_OF_REACH.search(text):
        if request.kind == "url":
            hint = "let the workers fetch URLs (DOCLANE_URL_MODE) or start it --allow-url-fetch"
        elif request.inbox is not None:
            hint = (
                f"the server must read doclane's inbox, DOCLANE_INBOX_DIR, where uploads and "
                f"downloads land: start it with --root {request.inbox} (or a folder above it), "
                "or set DOCLANE_INBOX_DIR to a folder under its roots (DOCLANE_PATH_MAP if the "
                "server sees it elsewhere)"
            )
            detail["root_to_add"] = request.inbox
            detail["setting"] = "DOCLANE_INBOX_DIR"
        else:
            folder = str(PurePosixPath(request.source).parent)
            hint = f"start it with --root {folder} (or a folder above it), or set DOCLANE_PATH_MAP"
            detail["root_to_add"] = folder
        return ServerCannotReach(f"{CONVERT}: {text}; {hint}", detail=detail)
    if _UNREADABLE.search(text):
        detail["unreadable"] = True
    return ConversionFailed(f"{CONVERT}: {text}", detail=detail)


def _concurrency_flag(argv: list[str]) -> int:
    """``--concurrency N`` or ``--concurrency=N`` of a command line (the last one given, as
    the server reads it), else the default."""
    found = DEFAULT_CONCURRENCY
    for place, word in enumerate(argv):
        name, equals, value = word.partition("=")
        if name != "--concurrency":
            continue
        if not equals:
            value = argv[place + 1] if place + 1 < len(argv) else ""
        if value.isdigit() and int(value) > 0:
            found = int(value)
    return found
