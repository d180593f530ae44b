"""Document formats: what a name promises and what the bytes really are.

Docling picks its backend by extension and fails with an opaque ``isError`` when the content
disagrees, so a source is accepted only when its extension names a supported format AND its
first bytes (and, for Office files, the zip's table of contents) agree. Everything here reads a
few kilobytes at most: the zip check reads the central directory and ``[Content_Types].xml``,
never a whole member, so a zip bomb costs nothing.
"""

from __future__ import annotations

import codecs
import zipfile
from enum import StrEnum
from pathlib import PurePosixPath
from typing import BinaryIO, Final

#: How many leading bytes are read to recognise a format.
HEAD_BYTES: Final = 8192
#: ``[Content_Types].xml`` larger than this is not a real Office document's.
_MAX_CONTENT_TYPES_BYTES: Final = 1024 * 1024


class DocumentFormat(StrEnum):
    PDF = "pdf"
    DOCX = "docx"
    XLSX = "xlsx"
    PPTX = "pptx"
    HTML = "html"
    MD = "md"
    CSV = "csv"
    PNG = "png"
    JPEG = "jpeg"
    TIFF = "tiff"
    BMP = "bmp"
    GIF = "gif"
    WEBP = "webp"

    @property
    def suffix(self) -> str:
        """The canonical file suffix, the one a downloaded source is stored under."""
        return _CANONICAL_SUFFIX[self]

    @property
    def short(self) -> str:
        """The name people use: "DOCX", "Markdown"."""
        return "Markdown" if self is DocumentFormat.MD else self.value.upper()

    @property
    def label(self) -> str:
        return _LABEL[self]

    @property
    def is_text(self) -> bool:
        return self in TEXT_FORMATS


TEXT_FORMATS: Final = frozenset({DocumentFormat.HTML, DocumentFormat.MD, DocumentFormat.CSV})
#: Text formats that must be UTF-8 throughout (HTML may declare another charset itself).
UTF8_FORMATS: Final = frozenset({DocumentFormat.MD, DocumentFormat.CSV})

_CANONICAL_SUFFIX: Final = {
    DocumentFormat.PDF: ".pdf",
    DocumentFormat.DOCX: ".docx",
    DocumentFormat.XLSX: ".xlsx",
    DocumentFormat.PPTX: ".pptx",
    DocumentFormat.HTML: ".html",
    DocumentFormat.MD: ".md",
    DocumentFormat.CSV: ".csv",
    DocumentFormat.PNG: ".png",
    DocumentFormat.JPEG: ".jpg",
    DocumentFormat.TIFF: ".tiff",
    DocumentFormat.BMP: ".bmp",
    DocumentFormat.GIF: ".gif",
    DocumentFormat.WEBP: ".webp",
}

_LABEL: Final = {
    DocumentFormat.PDF: "a PDF document",
    DocumentFormat.DOCX: "a Word document (DOCX)",
    DocumentFormat.XLSX: "an Excel workbook (XLSX)",
    DocumentFormat.PPTX: "a PowerPoint presentation (PPTX)",
    DocumentFormat.HTML: "an HTML page",
    DocumentFormat.MD: "a Markdown text",
    DocumentFormat.CSV: "a CSV table",
    DocumentFormat.PNG: "a PNG image",
    DocumentFormat.JPEG: "a JPEG image",
    DocumentFormat.TIFF: "a TIFF image",
    DocumentFormat.BMP: "a BMP image",
    DocumentFormat.GIF: "a GIF image",
    DocumentFormat.WEBP: "a WebP image",
}

#: Every suffix Docling accepts for a format doclane supports (docling's FormatToExtensions).
SUFFIXES: Final[dict[str, DocumentFormat]] = {
    ".pdf": DocumentFormat.PDF,
    **dict.fromkeys((".docx", ".docm", ".dotx", ".dotm"), DocumentFormat.DOCX),
    **dict.fromkeys((".xlsx", ".xlsm", ".xltx", ".xltm"), DocumentFormat.XLSX),
    **dict.fromkeys((".pptx", ".pptm", ".potx", ".potm", ".ppsx", ".ppsm"), DocumentFormat.PPTX),
    **dict.fromkeys((".html", ".htm", ".xhtml"), DocumentFormat.HTML),
    **dict.fromkeys((".md", ".markdown"), DocumentFormat.MD),
    ".csv": DocumentFormat.CSV,
    ".png": DocumentFormat.PNG,
    **dict.fromkeys((".jpg", ".jpeg"), DocumentFormat.JPEG),
    **dict.fromkeys((".tif", ".tiff"), DocumentFormat.TIFF),
    ".bmp": DocumentFormat.BMP,
    ".gif": DocumentFormat.GIF,
    ".webp": DocumentFormat.WEBP,
}

#: Content-Type (without parameters) -> format, for downloads.
CONTENT_TYPES: Final[dict[str, DocumentFormat]] = {
    "application/pdf": DocumentFormat.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DocumentFormat.DOCX,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": DocumentFormat.XLSX,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (
        DocumentFormat.PPTX
    ),
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "text/markdown": DocumentFormat.MD,
    "text/x-markdown": DocumentFormat.MD,
    "text/csv": DocumentFormat.CSV,
    "image/png": DocumentFormat.PNG,
    "image/jpeg": DocumentFormat.JPEG,
    "image/tiff": DocumentFormat.TIFF,
    "image/bmp": DocumentFormat.BMP,
    "image/gif": DocumentFormat.GIF,
    "image/webp": DocumentFormat.WEBP,
}

#: The zip folder holding an Office format's parts, and the words its main content type uses.
_OOXML: Final = {
    DocumentFormat.DOCX: ("word/", ("wordprocessingml", "ms-word")),
    DocumentFormat.XLSX: ("xl/", ("spreadsheetml", "ms-excel")),
    DocumentFormat.PPTX: ("ppt/", ("presentationml", "ms-powerpoint")),
}

ZIP: Final = "zip"
TEXT: Final = "text"
BINARY: Final = "binary"


class ContentNotItsFormat(ValueError):
    """The bytes are not what the format says; the message is the reason, for E102."""


def format_for_name(name: str) -> DocumentFormat | None:
    """The format a file name or URL path promises by its suffix (case-insensitive).

    A bare file name (every file of a walked folder) is read as ``PurePosixPath.suffix``
    reads it without making the object: that cost more than the rest of the name check.
    """
    if "/" in name:
        name = PurePosixPath(name).name
    dot = name.rfind(".")
    return SUFFIXES.get(name[dot:].lower()) if 0 < dot < len(name) - 1 else None


def format_for_content_type(content_type: str | None) -> DocumentFormat | None:
    if not content_type:
        return None
    return CONTENT_TYPES.get(content_type.split(";", 1)[0].strip().lower())


def sniff(head: bytes) -> DocumentFormat | str:
    """What the leading bytes are: a binary format, ``"zip"``, ``"text"`` or ``"binary"``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return DocumentFormat.PNG
    if head.startswith(b"\xff\xd8\xff"):
        return DocumentFormat.JPEG
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return DocumentFormat.TIFF
    if head.startswith((b"GIF87a", b"GIF89a")):
        return DocumentFormat.GIF
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return DocumentFormat.WEBP
    if head.startswith(b"BM") and len(head) >= 26 and head[6:10] == b"\x00\x00\x00\x00":
        return DocumentFormat.BMP
    if head.startswith(b"%PDF-"):
        return DocumentFormat.PDF
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return ZIP
    return TEXT if looks_like_text(head) else BINARY


def looks_like_text(head: bytes) -> bool:
    """No NUL bytes (UTF-16 with a BOM excepted) and decodable in its apparent encoding."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            codecs.getincrementaldecoder("utf-16")().decode(head, final=False)
        except UnicodeDecodeError:
            return False
        return True
    return b"\x00" not in head


def is_utf8_prefix(head: bytes) -> bool:
    """Whether ``head`` is valid UTF-8, allowing a character cut at the end."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def looks_like_html(head: bytes) -> bool:
    """A tag (``<html``, ``<!doctype``, ``<p``...) near the start, after BOM and whitespace."""
    text = _decode_head(head).lstrip("\ufeff \t\r\n").lower()
    probe = text[:2048]
    if probe.startswith(("<!doctype html", "<html", "<?xml")):
        return True
    for marker in ("<html", "<head", "<body", "<div", "<p>", "<p ", "<h1", "<table", "<title"):
        if marker in probe:
            return True
    return probe.startswith("<") and len(probe) > 1 and (probe[1].isalpha() or probe[1] == "!")


def _decode_head(head: bytes) -> str:
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return head.decode("utf-16", errors="replace")
    return head.decode("utf-8", errors="replace")


def check_content(expected: DocumentFormat, head: bytes, stream: BinaryIO) -> None:
    """Raise :class:`ContentNotItsFormat` unless the bytes are ``expected``.

    ``stream`` is the open, seekable source; only Office formats read from it (the zip
    directory). Its position is left wherever the check left it.
    """
    found = sniff(head)
    if expected is DocumentFormat.PDF and b"%PDF-" in head[:1024]:
        # Readers find the header anywhere in the first 1024 bytes (junk before it happens).
        return
    if expected in _OOXML:
        if found != ZIP:
            raise ContentNotItsFormat(f"the name says {expected.short} but {_describe(found)}")
        check_ooxml(expected, stream)
        return
    if expected.is_text:
        if found != TEXT:
            raise ContentNotItsFormat(f"the name says {expected.short} but {_describe(found)}")
        if expected in UTF8_FORMATS and not is_utf8_prefix(head):
            raise ContentNotItsFormat(f"{expected.label} must be UTF-8 text, and this is not")
        if expected is DocumentFormat.HTML and not looks_like_html(head):
            raise ContentNotItsFormat("the name says HTML but the text has no HTML markup")
        return
    if found != expected:
        raise ContentNotItsFormat(f"the name says {expected.short} but {_describe(found)}")


def check_ooxml(expected: DocumentFormat, stream: BinaryIO) -> None:
    """An Office Open XML file is a zip with ``[Content_Types].xml`` and the format's folder."""
    folder, type_words = _OOXML[expected]
    stream.seek(0)
    try:
        with zipfile.ZipFile(stream) as archive:
            names = archive.namelist()
            try:
                info = archive.getinfo("[Content_Types].xml")
            except KeyError:
                raise ContentNotItsFormat(
                    "the content is a zip archive without [Content_Types].xml, "
                    f"not {expected.label}"
                ) from None
            if info.file_size > _MAX_CONTENT_TYPES_BYTES:
                raise ContentNotItsFormat("its [Content_Types].xml is implausibly large")
            content_types = archive.read(info).decode("utf-8", errors="replace").lower()
    except zipfile.BadZipFile as exc:
        raise ContentNotItsFormat(f"the content is not a readable zip archive ({exc})") from None
    if not any(name.startswith(folder) for name in names):
        other = _ooxml_kind(names)
        what = other.label if other else "a zip archive of another kind"
        raise ContentNotItsFormat(f"the name says {expected.short} but the content is {what}")
    if not any(word in content_types for word in type_words):
        raise ContentNotItsFormat(f"its [Content_Types].xml declares no {expected.short} main part")


def _ooxml_kind(names: list[str]) -> DocumentFormat | None:
    for fmt, (folder, _words) in _OOXML.items():
        if any(name.startswith(folder) for name in names):
            return fmt
    return None


def _describe(found: DocumentFormat | str) -> str:
    if isinstance(found, DocumentFormat):
        return f"the content is {found.label}"
    if found == ZIP:
        return "the content is a zip archive"
    if found == TEXT:
        return "the content is plain text"
    return "the content is binary data of an unknown kind"


def detect_download_format(
    head: bytes, stream: BinaryIO, *, content_type: str | None, url_path: str
) -> DocumentFormat:
    """A downloaded document's format: magic bytes first, then Content-Type, then the URL suffix.

    Magic bytes are the only evidence a server cannot get wrong by configuration, so they
    decide whenever they are decisive (PDF, images, Office zips). Text has no magic: there a
    specific Content-Type wins, then the URL's suffix, then HTML markup; plain text naming no
    format is refused rather than guessed.
    """
    by_type = format_for_content_type(content_type)
    by_name = format_for_name(url_path)
    found = sniff(head)
    if isinstance(found, DocumentFormat):
        return found
    if found == ZIP:
        stream.seek(0)
        try:
            with zipfile.ZipFile(stream) as archive:
                kind = _ooxml_kind(archive.namelist())
        except zipfile.BadZipFile as exc:
            raise ContentNotItsFormat(
                f"the content is not a readable zip archive ({exc})"
            ) from None
        if kind is None:
            raise ContentNotItsFormat("the content is a zip archive that is not an Office document")
        check_ooxml(kind, stream)
        return kind
    if found == BINARY:
        raise ContentNotItsFormat(_describe(found))
    for candidate in (by_type, by_name):
        if candidate is not None and candidate.is_text:
            check_content(candidate, head, stream)
            return candidate
    if looks_like_html(head):
        return DocumentFormat.HTML
    named = by_type or by_name
    if named is not None:
        raise ContentNotItsFormat(f"the server says {named.label} but {_describe(found)}")
    raise ContentNotItsFormat(
        f"the content is plain text and neither its Content-Type ({content_type or 'none'}) "
        "nor the URL names a supported format"
    )
