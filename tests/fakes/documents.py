"""A tiny stand-in for Docling's conversion: file -> blocks -> markdown, HTML or Docling-like JSON.

Tests assert on headings and table cells, so the fake derives them from the file the way a reader
would expect: Markdown as is, HTML tags into headings and text, CSV into a table, and any other
supported type into a heading from the file name plus one line of text. Nothing here tries to be
Docling; it only has to be deterministic and obviously derived from the input.
"""

from __future__ import annotations

import csv
import hashlib
import io
import mimetypes
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

#: What docling 2.x accepts (by suffix); anything else is "File format not allowed".
SUPPORTED_SUFFIXES = frozenset(
    {
        ".pdf", ".docx", ".dotx", ".pptx", ".xlsx", ".html", ".htm", ".xhtml", ".md",
        ".markdown", ".csv", ".adoc", ".asciidoc", ".png", ".jpg", ".jpeg", ".tif", ".tiff",
        ".bmp", ".webp", ".xml",
    }
)  # fmt: skip


class ConversionFailed(Exception):
    """The fake refuses the source, for the reason the real server's log would give."""


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class ListItem:
    text: str


@dataclass(frozen=True)
class Table:
    rows: tuple[tuple[str, ...], ...]


Block = Heading | Paragraph | ListItem | Table


@dataclass
class Document:
    """One converted document: its key, its blocks and its markdown."""

    name: str
    filename: str
    key: str
    blocks: list[Block]
    markdown: str
    mimetype: str = "application/octet-stream"
    meta: dict[str, Any] = field(default_factory=dict)
    #: Docling's ``origin.binary_hash``: the low 64 bits of the file's sha256 (None: from the key).
    binary_hash: int | None = None


def document_key(content: bytes, suffix: str) -> str:
    """sha256 over content and suffix, 32 hex: deterministic like the real server's key."""
    return hashlib.sha256(content + suffix.lower().encode()).hexdigest()[:32]


def convert_file(path: Path) -> Document:
    """Convert a local file, or raise ConversionFailed like the real server would fail."""
    if not path.exists():
        raise ConversionFailed(f"No such file: {path}")
    if path.is_dir():
        raise ConversionFailed(f"Is a directory: {path}")
    return convert_bytes(path.read_bytes(), path.name)


def convert_bytes(content: bytes, filename: str) -> Document:
    """Convert ``content`` named ``filename`` (the suffix picks the reader)."""
    suffix = Path(filename).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ConversionFailed(f"File format not allowed: {filename}")
    stem = Path(filename).stem
    if suffix in (".md", ".markdown"):
        markdown = content.decode("utf-8", errors="replace")
    elif suffix in (".html", ".htm", ".xhtml"):
        markdown = blocks_to_markdown(html_to_blocks(content.decode("utf-8", errors="replace")))
    elif suffix == ".csv":
        rows = [row for row in csv.reader(io.StringIO(content.decode("utf-8", errors="replace")))]
        markdown = blocks_to_markdown([Table(tuple(tuple(r) for r in rows if r))]) if rows else ""
    else:
        markdown = (
            f"# {stem}\n\nConverted from {filename} ({len(content)} bytes, "
            f"{suffix.lstrip('.')} format) by the fake Docling server.\n"
        )
    return Document(
        name=stem,
        filename=filename,
        key=document_key(content, suffix),
        blocks=markdown_to_blocks(markdown),
        markdown=markdown,
        mimetype=mimetypes.guess_type(filename)[0] or "application/octet-stream",
        meta={"size": len(content), "suffix": suffix},
        binary_hash=int(hashlib.sha256(content).hexdigest(), 16) & 0xFFFF_FFFF_FFFF_FFFF,
    )


# --- HTML ----------------------------------------------------------------------------------


class _HtmlBlocks(HTMLParser):
    """Headings, paragraphs, list items and tables out of HTML, ignoring head/script/style."""

    _TEXT_TAGS = frozenset({"p", "div", "li", "td", "th", "caption", "blockquote", "pre"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._text: list[str] = []
        self._heading: int | None = None
        self._skip = 0
        self._table: list[list[str]] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("head", "script", "style", "title"):
            self._skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self._heading = int(tag[1])
        elif tag == "table":
            self._flush()
            self._table = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") or tag in self._TEXT_TAGS or tag == "br":
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in ("head", "script", "style", "title"):
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
        elif tag in ("td", "th") and self._row is not None:
            self._row.append(self._take())
        elif tag == "tr" and self._table is not None and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table" and self._table is not None:
            if self._table:
                self.blocks.append(Table(tuple(tuple(r) for r in self._table)))
            self._table = None
        elif tag == "li":
            text = self._take()
            if text:
                self.blocks.append(ListItem(text))
        elif tag in self._TEXT_TAGS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        self._flush()

    def _take(self) -> str:
        text = " ".join("".join(self._text).split())
        self._text = []
        return text

    def _flush(self) -> None:
        if self._row is not None:
            return  # inside a table cell: the cell end collects the text
        text = self._take()
        if not text:
            self._heading = None
            return
        self.blocks.append(Heading(self._heading, text) if self._heading else Paragraph(text))
        self._heading = None


def html_to_blocks(html: str) -> list[Block]:
    parser = _HtmlBlocks()
    parser.feed(html)
    parser.close()
    return parser.blocks


# --- Markdown ------------------------------------------------------------------------------

_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def markdown_to_blocks(markdown: str) -> list[Block]:
    """A forgiving reader of the Markdown this module writes (and of simple hand-written files)."""
    blocks: list[Block] = []
    table: list[tuple[str, ...]] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Paragraph(" ".join(paragraph)))
            paragraph.clear()
        if table:
            blocks.append(Table(tuple(table)))
            table.clear()

    for raw in markdown.splitlines():
        line = raw.strip()
        if line.startswith("|"):
            if paragraph:
                flush()
            if not _TABLE_RULE.match(line):
                table.append(_cells(line))
            continue
        if table:
            flush()
        if not line:
            flush()
        elif heading := re.match(r"^(#{1,6})\s+(.*)$", line):
            flush()
            blocks.append(Heading(len(heading.group(1)), heading.group(2).strip()))
        elif item := re.match(r"^[-*+]\s+(.*)$", line):
            flush()
            blocks.append(ListItem(item.group(1)))
        else:
            paragraph.append(line)
    flush()
    return blocks


def blocks_to_markdown(blocks: list[Block]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, ListItem):
            parts.append(f"- {block.text}")
        elif block.rows:
            header, *body = block.rows
            lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            lines += ["| " + " | ".join(row) + " |" for row in body]
            parts.append("\n".join(lines))
    return "\n\n".join(parts) + ("\n" if parts else "")


def blocks_to_html(blocks: list[Block], title: str) -> str:
    from html import escape

    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{escape(block.text)}</p>")
        elif isinstance(block, ListItem):
            body.append(f"<ul><li>{escape(block.text)}</li></ul>")
        else:
            rows = "".join(
                "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
                for row in block.rows
            )
            body.append(f"<table>{rows}</table>")
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"</head><body>\n{chr(10).join(body)}\n</body></html>\n"
    )


# --- Docling-like JSON ---------------------------------------------------------------------


def to_docling_json(document: Document) -> dict[str, Any]:
    """A DoclingDocument-shaped dict: the fields the seed's DoclingDocumentSchema names."""
    texts: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    children: list[dict[str, str]] = []
    for block in document.blocks:
        if isinstance(block, Table):
            ref = f"#/tables/{len(tables)}"
            grid = [[{"text": cell} for cell in row] for row in block.rows]
            width = max((len(row) for row in block.rows), default=0)
            tables.append(
                {
                    "self_ref": ref,
                    "label": "table",
                    "data": {"num_rows": len(block.rows), "num_cols": width, "grid": grid},
                }
            )
        else:
            ref = f"#/texts/{len(texts)}"
            item: dict[str, Any] = {"self_ref": ref, "text": block.text, "orig": block.text}
            if isinstance(block, Heading):
                item |= {"label": "title" if block.level == 1 else "section_header"}
                item["level"] = block.level
            else:
                item["label"] = "list_item" if isinstance(block, ListItem) else "text"
            texts.append(item)
        children.append({"$ref": ref})
    return {
        "schema_name": "DoclingDocument",
        "version": "1.5.0",
        "name": document.name,
        "origin": {
            "mimetype": document.mimetype,
            "binary_hash": document.binary_hash
            if document.binary_hash is not None
            else int(document.key[:15], 16),
            "filename": document.filename,
        },
        "furniture": {"self_ref": "#/furniture", "children": [], "label": "unspecified"},
        "body": {"self_ref": "#/body", "children": children, "label": "unspecified"},
        "groups": [],
        "texts": texts,
        "pictures": [],
        "tables": tables,
        "key_value_items": [],
        "form_items": [],
        "pages": {},
    }


def from_docling_json(data: dict[str, Any]) -> Document:
    """Read back what to_docling_json wrote (refs in body order); unknown refs are skipped."""
    blocks: list[Block] = []
    for child in data.get("body", {}).get("children", []):
        match = re.fullmatch(r"#/(texts|tables)/(\d+)", str(child.get("$ref", "")))
        if not match:
            continue
        items = data.get(match.group(1), [])
        index = int(match.group(2))
        if index >= len(items):
            continue
        item = items[index]
        if match.group(1) == "tables":
            grid = item.get("data", {}).get("grid", [])
            blocks.append(Table(tuple(tuple(str(c.get("text", "")) for c in row) for row in grid)))
        elif item.get("label") in ("title", "section_header"):
            blocks.append(Heading(int(item.get("level", 1)), str(item.get("text", ""))))
        elif item.get("label") == "list_item":
            blocks.append(ListItem(str(item.get("text", ""))))
        else:
            blocks.append(Paragraph(str(item.get("text", ""))))
    origin = data.get("origin", {})
    name = str(data.get("name", "document"))
    return Document(
        name=name,
        filename=str(origin.get("filename", name)),
        key=f"{int(origin.get('binary_hash', 0)):032x}"[-32:],
        blocks=blocks,
        markdown=blocks_to_markdown(blocks),
        mimetype=str(origin.get("mimetype", "application/octet-stream")),
        binary_hash=int(origin.get("binary_hash", 0)),
    )
