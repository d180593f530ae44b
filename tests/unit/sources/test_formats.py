"""How a download's format is decided: magic bytes first, then Content-Type, then URL suffix."""

from __future__ import annotations

import io

import pytest

from pipeline.sources.formats import (
    ContentNotItsFormat,
    DocumentFormat,
    detect_download_format,
    format_for_content_type,
    format_for_name,
    sniff,
)
from tests.fixtures import source_samples as samples


def detect(data: bytes, content_type: str | None = None, url_path: str = "/download") -> str:
    return detect_download_format(
        data[:8192], io.BytesIO(data), content_type=content_type, url_path=url_path
    ).value


@pytest.mark.parametrize(
    ("data", "content_type", "path", "expected"),
    [
        (samples.pdf_bytes(), "text/html", "/page.html", "pdf"),  # magic beats a wrong type
        (samples.docx_bytes(), "application/octet-stream", "/get?id=7", "docx"),
        (samples.xlsx_bytes(), None, "/x", "xlsx"),
        (samples.pptx_bytes(), "application/zip", "/deck.zip", "pptx"),
        (samples.png_bytes(), None, "/x.jpg", "png"),
        (samples.MARKDOWN.encode(), "text/markdown; charset=utf-8", "/notes", "md"),
        (samples.CSV.encode(), "text/csv", "/export", "csv"),
        (samples.CSV.encode(), "text/plain", "/export.csv", "csv"),  # suffix when type is vague
        (samples.HTML.encode(), "text/html; charset=utf-8", "/", "html"),
        (samples.HTML.encode(), None, "/index", "html"),  # markup when nothing else says
    ],
)
def test_detection(data, content_type, path, expected):
    assert detect(data, content_type, path) == expected


@pytest.mark.parametrize(
    ("data", "content_type", "path", "reason"),
    [
        (b"\x00\x01binary\x00" * 50, "application/pdf", "/a.pdf", "binary data"),
        (samples.plain_zip_bytes(), "application/zip", "/a.zip", "not an Office document"),
        (b"just some words", "text/plain", "/readme", "names a supported format"),
        (b"just some words", "text/html", "/a", "no HTML markup"),
        (b"\xff\xfe\xfd not utf-8", "text/csv", "/a.csv", "must be UTF-8"),
    ],
)
def test_refusals(data, content_type, path, reason):
    with pytest.raises(ContentNotItsFormat, match=reason):
        detect(data, content_type, path)


def test_names_and_types_map_case_insensitively():
    assert format_for_name("REPORT.DOCX") is DocumentFormat.DOCX
    assert format_for_name("/a/b/notes.markdown") is DocumentFormat.MD
    assert format_for_name("archive.tar.gz") is None
    assert format_for_content_type("Text/HTML; charset=UTF-8") is DocumentFormat.HTML
    assert format_for_content_type("application/octet-stream") is None


@pytest.mark.parametrize(
    "name",
    [
        "a.md", "A.MD", ".md", "..md", "a.", "a..", ".", "..", "", "md", "a.tar.md", "a.md.txt",
        ".hidden.pdf", "x.md/", "x.md/.", "dir/.md", "/a/b.pdf", "/a/b.pdf/", "a b.docx ",
        "résumé.PDF", "a.Md", "a.İ",
    ],
)  # fmt: skip
def test_a_name_reads_its_suffix_as_pathlib_does(name):
    """format_for_name skips pathlib for bare names: it must read every name as pathlib would."""
    from pathlib import PurePosixPath

    from pipeline.sources.formats import SUFFIXES

    assert format_for_name(name) is SUFFIXES.get(PurePosixPath(name).suffix.lower())


def test_a_markdown_text_mentioning_pdf_is_not_sniffed_as_pdf():
    assert sniff(b"# About PDFs\n\nEvery file starts with %PDF-1.7 ...") == "text"


def test_a_pdf_with_junk_before_its_header_is_still_a_pdf_by_name(tmp_path):
    from pipeline.settings.tree import read_settings
    from pipeline.sources.local import validate_file

    path = tmp_path / "mail.pdf"
    path.write_bytes(b"X-Junk: mail gateway header\r\n\r\n" + samples.pdf_bytes())
    assert validate_file(path, read_settings().sources).format is DocumentFormat.PDF
