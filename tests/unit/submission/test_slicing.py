"""Which documents are sliced, and into which page runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.jobs.options import ConversionOptions
from pipeline.submission.slicing import count_pages, page_runs, slices_for
from tests.support.long_pdf import write_long_pdf


def test_page_runs_cover_every_page_once_in_order() -> None:
    assert page_runs(70, 32) == ("1-32", "33-64", "65-70")
    assert page_runs(65, 32) == ("1-32", "33-64", "65")
    assert page_runs(3, 1) == ("1", "2", "3")
    with pytest.raises(ValueError):
        page_runs(3, 0)


@pytest.fixture(scope="module")
def long_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_long_pdf(tmp_path_factory.mktemp("pdf") / "long.pdf", pages=40)


def test_pages_are_counted_by_the_pdf_library(long_pdf: Path, tmp_path: Path) -> None:
    assert count_pages(long_pdf) == 40
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nnot really a pdf")
    assert count_pages(broken) is None


@pytest.mark.parametrize(
    ("formats", "options", "slice_pages", "expected"),
    [
        (("md",), {}, 16, ("1-16", "17-32", "33-40")),
        (("chunks", "md", "text"), {}, 20, ("1-20", "21-40")),
        (("md",), {}, 40, ()),  # not over the threshold
        (("md",), {}, 0, ()),  # slicing off
        (("json", "md"), {}, 16, ()),  # Docling JSON is one document
        (("html",), {}, 16, ()),
        (("md",), {"pages": "1-5"}, 2, ()),  # the submitter's own page range
    ],
)
def test_slices_for(
    long_pdf: Path,
    formats: tuple[str, ...],
    options: dict[str, str],
    slice_pages: int,
    expected: tuple[str, ...],
) -> None:
    got = slices_for(
        long_pdf,
        formats=formats,
        options=ConversionOptions.parse(options),
        slice_pages=slice_pages,
    )
    assert got == expected


def test_only_pdfs_are_sliced(tmp_path: Path) -> None:
    other = tmp_path / "notes.md"
    other.write_text("# Notes\n")
    assert slices_for(other, formats=("md",), options=ConversionOptions(), slice_pages=1) == ()
    assert slices_for(None, formats=("md",), options=ConversionOptions(), slice_pages=1) == ()
