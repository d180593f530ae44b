"""Which documents are converted by the whole fleet, as slices, and in which page runs.

A PDF over ``DOCLANE_SLICE_PAGES`` pages is submitted as one job that waits and one slice job
per run of that many pages (``"1-32"``, ``"33-64"``, ...), each converted through the server's
``pages`` option by whichever worker takes it; the database joins their results, in page
order, when the last one is stored (migration 0017). A document converted by one server call
takes as long as that server's one process needs; its slices take that time divided by the
workers free for them.

Not sliced, and converted whole as before: a document that is not a PDF or whose pages cannot
be counted (encrypted, damaged), a job that names its own page range, and a job asking for a
format whose slices cannot be joined by concatenation (Docling JSON and HTML are one
document each, with references and a head of their own). Only ``md``, ``text`` and ``chunks``
are joined.

Pages are counted by pypdf, at submission, from the file's own page tree; the same count
refuses a page range past a PDF's last page (E110, :func:`pages_refusal`) before it is a job
whose every attempt would fail on a worker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from errors import InvalidOption
from pipeline.jobs.options import PAGES, ConversionOptions, last_page

log = logging.getLogger("doclane.slicing")

#: The formats whose slices' results are joined in page order (migration 0017's assembly).
JOINABLE_FORMATS = frozenset({"md", "text", "chunks"})


def page_runs(pages: int, per_slice: int) -> tuple[str, ...]:
    """``pages`` split into runs of ``per_slice`` (the last one shorter), as ``pages`` options."""
    if per_slice < 1:
        raise ValueError("a slice has at least one page")
    runs = []
    for first in range(1, pages + 1, per_slice):
        last = min(first + per_slice - 1, pages)
        runs.append(str(first) if first == last else f"{first}-{last}")
    return tuple(runs)


def count_pages(path: Path) -> int | None:
    """The PDF's page count; None when it cannot be read without a password or is damaged."""
    from pypdf import PdfReader  # only submissions that may slice pay for the import
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            return None
        return len(reader.pages)
    except (PyPdfError, OSError, ValueError, KeyError) as exc:
        log.info("not sliced: cannot count the pages of %s (%s)", path, exc)
        return None


def slices_for(
    path: Path | None,
    *,
    formats: Iterable[str],
    options: ConversionOptions,
    slice_pages: int,
) -> tuple[str, ...]:
    """The page runs a document is converted as; empty when it is converted whole."""
    if (
        slice_pages <= 0
        or path is None
        or path.suffix.lower() != ".pdf"
        or options.pages is not None
        or not set(formats) <= JOINABLE_FORMATS
    ):
        return ()
    pages = count_pages(path)
    if pages is None or pages <= slice_pages:
        return ()
    return page_runs(pages, slice_pages)


def pages_refusal(path: Path | None, options: ConversionOptions) -> InvalidOption | None:
    """E110 when the job's page range ends past the last page of the PDF at ``path``; None
    when it fits, or when the count is not known here (not a local PDF, encrypted, damaged:
    the server is the judge then)."""
    if options.pages is None or path is None or path.suffix.lower() != ".pdf":
        return None
    pages = count_pages(path)
    if pages is None or last_page(options.pages) <= pages:
        return None
    whole = "page 1" if pages == 1 else f"pages 1-{pages}"
    return InvalidOption(
        f"page range {options.pages} is past the end of {path.name}, which has {whole}",
        detail={"option": PAGES, "value": options.pages, "document_pages": pages},
    )
