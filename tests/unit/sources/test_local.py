"""validate_file: every E1xx code from its real trigger, on real files in tmp_path."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from errors import (
    EmptySource,
    InputError,
    PathOutsideRoots,
    SourceNotFound,
    SourceTooLarge,
    UnsupportedFormat,
)
from pipeline.settings.tree import read_settings
from pipeline.sources.formats import DocumentFormat
from pipeline.sources.local import validate_file
from tests.fixtures import source_samples as samples

REPO = Path(__file__).resolve().parents[3]


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


@pytest.fixture
def settings():
    return read_settings(sources=dict(allowed_roots=(), path_map=())).sources


# ---- accepted -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "data", "fmt"),
    [
        ("report.docx", samples.docx_bytes(), DocumentFormat.DOCX),
        ("sheet.xlsx", samples.xlsx_bytes(), DocumentFormat.XLSX),
        ("deck.pptx", samples.pptx_bytes(), DocumentFormat.PPTX),
        ("paper.pdf", samples.pdf_bytes(), DocumentFormat.PDF),
        ("page.html", samples.HTML, DocumentFormat.HTML),
        ("notes.md", samples.MARKDOWN, DocumentFormat.MD),
        ("cities.csv", samples.CSV, DocumentFormat.CSV),
        ("dot.png", samples.png_bytes(), DocumentFormat.PNG),
        ("photo.JPG", samples.jpeg_bytes(), DocumentFormat.JPEG),
        ("scan.tif", samples.tiff_bytes(), DocumentFormat.TIFF),
    ],
)
def test_a_real_document_of_each_type_is_described(tmp_path, settings, name, data, fmt):
    path = write(tmp_path / name, data)
    info = validate_file(path, settings)
    raw = path.read_bytes()
    assert info.kind == "file"
    assert info.format is fmt
    assert info.uri == str(path.resolve())
    assert info.server_uri == info.uri  # no path map
    assert info.size_bytes == len(raw)
    assert info.sha256 == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (REPO / "examples").iterdir() if not p.name.startswith(".")),
)
def test_the_shipped_examples_pass(settings, name):
    info = validate_file(REPO / "examples" / name, settings)
    assert info.format is not None
    assert info.format.suffix == Path(name).suffix.lower()


def test_a_hash_spanning_many_chunks_is_the_files_hash(tmp_path, settings):
    text = "".join(f"| row {i} | {'x' * 50} |\n" for i in range(60_000))  # ~3.7 MB of UTF-8
    path = write(tmp_path / "long.md", "# Long\n" + text)
    info = validate_file(path, settings)
    assert info.size_bytes == path.stat().st_size > 3 * 1024 * 1024
    assert info.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_path_map_names_the_file_as_the_server_sees_it(tmp_path):
    path = write(tmp_path / "inbox" / "a.md", "# A")
    settings = read_settings(sources=dict(path_map=f"{tmp_path}/inbox:/data/inbox")).sources
    assert validate_file(path, settings).server_uri == "/data/inbox/a.md"


# ---- E101 -------------------------------------------------------------------------------------
def test_a_missing_file_is_E101(tmp_path, settings):
    with pytest.raises(SourceNotFound) as caught:
        validate_file(tmp_path / "nowhere.docx", settings, label="nowhere.docx")
    assert caught.value.code == "E101"
    assert caught.value.message == "nowhere.docx: no such file"


def test_a_dangling_link_is_E101(tmp_path, settings):
    (tmp_path / "gone.md").symlink_to(tmp_path / "deleted.md")
    with pytest.raises(SourceNotFound, match="link to a missing file"):
        validate_file(tmp_path / "gone.md", settings)


def test_a_folder_named_as_a_file_is_E101(tmp_path, settings):
    (tmp_path / "folder.docx").mkdir()
    with pytest.raises(SourceNotFound, match="is a folder"):
        validate_file(tmp_path / "folder.docx", settings)


def test_a_fifo_is_E101_and_is_never_opened(tmp_path, settings):
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)  # opening it for reading would block forever: the check must come first
    with pytest.raises(SourceNotFound, match="not a regular file"):
        validate_file(fifo, settings)


# ---- E102 -------------------------------------------------------------------------------------
def test_an_unknown_extension_is_E102(tmp_path, settings):
    path = write(tmp_path / "notes.txt", "hello")
    with pytest.raises(UnsupportedFormat, match=r"\.txt is not a supported document type"):
        validate_file(path, settings)


def test_a_docx_of_random_bytes_is_E102(tmp_path, settings):
    path = write(tmp_path / "fake.docx", os.urandom(4096).replace(b"PK", b"pk"))
    with pytest.raises(UnsupportedFormat) as caught:
        validate_file(path, settings)
    assert caught.value.code == "E102"
    assert "the name says DOCX" in caught.value.message


def test_a_docx_that_is_really_a_pdf_is_E102(tmp_path, settings):
    path = write(tmp_path / "contract.docx", samples.pdf_bytes())
    with pytest.raises(UnsupportedFormat, match="the content is a PDF document"):
        validate_file(path, settings)


def test_an_xlsx_that_is_really_a_docx_is_E102(tmp_path, settings):
    path = write(tmp_path / "budget.xlsx", samples.docx_bytes())
    with pytest.raises(UnsupportedFormat, match=r"the content is a Word document \(DOCX\)"):
        validate_file(path, settings)


def test_a_docx_that_is_a_plain_zip_is_E102(tmp_path, settings):
    path = write(tmp_path / "archive.docx", samples.plain_zip_bytes())
    with pytest.raises(UnsupportedFormat, match=r"without \[Content_Types\]\.xml"):
        validate_file(path, settings)


def test_a_truncated_docx_is_E102(tmp_path, settings):
    path = write(tmp_path / "cut.docx", samples.docx_bytes()[:200])
    with pytest.raises(UnsupportedFormat, match="not a readable zip"):
        validate_file(path, settings)


def test_a_pdf_without_its_header_is_E102(tmp_path, settings):
    path = write(tmp_path / "paper.pdf", b"%PDX-1.4 not really\n" * 10)
    with pytest.raises(UnsupportedFormat, match="the name says PDF"):
        validate_file(path, settings)


def test_a_png_that_is_a_jpeg_is_E102(tmp_path, settings):
    path = write(tmp_path / "image.png", samples.jpeg_bytes())
    with pytest.raises(UnsupportedFormat, match="the content is a JPEG image"):
        validate_file(path, settings)


def test_a_csv_that_is_binary_is_E102(tmp_path, settings):
    path = write(tmp_path / "data.csv", b"a,b\n\x00\x01\x02\x03")
    with pytest.raises(UnsupportedFormat, match="binary data"):
        validate_file(path, settings)


def test_a_markdown_that_turns_non_utf8_past_the_head_is_E102(tmp_path, settings):
    path = write(tmp_path / "notes.md", b"# Notes\n" + b"a" * 100_000 + b"\xff\xfe caf\xe9\n")
    with pytest.raises(UnsupportedFormat, match="must be UTF-8"):
        validate_file(path, settings)


def test_an_html_without_markup_is_E102(tmp_path, settings):
    path = write(tmp_path / "page.html", "just words, no tags at all")
    with pytest.raises(UnsupportedFormat, match="no HTML markup"):
        validate_file(path, settings)


# ---- E103 / E106 ------------------------------------------------------------------------------
def test_an_empty_file_is_E106(tmp_path, settings):
    path = write(tmp_path / "empty.docx", b"")
    with pytest.raises(EmptySource) as caught:
        validate_file(path, settings)
    assert caught.value.code == "E106"
    assert "empty (0 bytes)" in caught.value.message


def test_a_file_over_the_maximum_is_E103(tmp_path):
    path = write(tmp_path / "big.md", "# Big\n" + "x" * 2000)
    settings = read_settings(sources=dict(max_source_bytes=1024)).sources
    with pytest.raises(SourceTooLarge) as caught:
        validate_file(path, settings)
    assert caught.value.code == "E103"
    assert caught.value.detail["max_bytes"] == 1024
    assert "2006 bytes is more than the maximum of 1024" in caught.value.message


def test_a_file_exactly_at_the_maximum_passes(tmp_path):
    path = write(tmp_path / "edge.md", "#" * 1024)
    assert (
        validate_file(path, read_settings(sources=dict(max_source_bytes=1024)).sources).size_bytes
        == 1024
    )


# ---- E105 -------------------------------------------------------------------------------------
def test_a_file_outside_the_allowed_roots_is_E105(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    path = write(tmp_path / "elsewhere" / "a.md", "# A")
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    with pytest.raises(PathOutsideRoots) as caught:
        validate_file(path, settings)
    assert caught.value.code == "E105"


def test_a_link_escaping_the_allowed_root_is_E105(tmp_path):
    allowed = tmp_path / "allowed"
    secret = write(tmp_path / "secret" / "passwords.md", "# secret")
    allowed.mkdir()
    (allowed / "innocent.md").symlink_to(secret)
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    with pytest.raises(PathOutsideRoots, match=r"it leads to .*secret/passwords\.md"):
        validate_file(allowed / "innocent.md", settings)


def test_dot_dot_cannot_climb_out_of_the_allowed_root(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    write(tmp_path / "outside.md", "# out")
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    with pytest.raises(PathOutsideRoots):
        validate_file(f"{allowed}/../outside.md", settings)


def test_a_link_inside_the_allowed_root_is_followed_and_named_by_its_target(tmp_path):
    allowed = tmp_path / "allowed"
    target = write(allowed / "real" / "a.md", "# A")
    (allowed / "alias.md").symlink_to(target)
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    info = validate_file(allowed / "alias.md", settings)
    assert info.uri == str(target.resolve())


def test_an_allowed_root_that_is_a_link_still_admits_its_files(tmp_path):
    real = tmp_path / "real-root"
    path = write(real / "a.md", "# A")
    (tmp_path / "root-link").symlink_to(real)
    settings = read_settings(sources=dict(allowed_roots=str(tmp_path / "root-link"))).sources
    assert validate_file(path, settings).uri == str(path.resolve())


def test_outside_roots_wins_over_missing_so_nothing_leaks_about_other_folders(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    with pytest.raises(PathOutsideRoots):
        validate_file(tmp_path / "maybe-there.md", settings)


def test_every_refusal_is_an_input_error_with_the_catalog_texts(tmp_path, settings):
    with pytest.raises(InputError) as caught:
        validate_file(tmp_path / "x.md", settings)
    data = caught.value.to_dict()
    assert data["retryable"] is False
    assert data["detail"]["source"].endswith("x.md")
