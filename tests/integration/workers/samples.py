"""Distinct sample documents of every type the pipeline converts, written into a folder.

Each one is unique (its number is in its content), so dedup never merges two of them.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from tests.fixtures.source_samples import docx_bytes, pptx_bytes, xlsx_bytes

KINDS = ("md", "html", "csv", "docx", "xlsx", "pptx")


def sample_bytes(kind: str, number: int) -> bytes:
    if kind == "md":
        return f"# Notes {number}\n\n| item | value |\n|---|---|\n| n | {number} |\n".encode()
    if kind == "html":
        return (
            f"<!DOCTYPE html><html><head><title>Page {number}</title></head><body>"
            f"<h1>Page {number}</h1><p>Hello {number}</p></body></html>"
        ).encode()
    if kind == "csv":
        return f"city,people\nOslo,{700000 + number}\nBergen,{280000 + number}\n".encode()
    if kind == "docx":
        return docx_bytes(heading=f"Report {number}")
    if kind == "xlsx":
        return _unique_zip(xlsx_bytes(), number)
    if kind == "pptx":
        return _unique_zip(pptx_bytes(), number)
    raise ValueError(kind)


def _unique_zip(package: bytes, number: int) -> bytes:
    """Make an Office package unique by a zip comment (the format check still accepts it)."""
    source = zipfile.ZipFile(io.BytesIO(package))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        target.comment = f"sample {number}".encode()
    return out.getvalue()


def write_sample(folder: Path, kind: str, number: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"sample-{number:04d}.{kind}"
    path.write_bytes(sample_bytes(kind, number))
    return path


def write_mixed(folder: Path, count: int, *, start: int = 0) -> list[Path]:
    """``count`` documents cycling through every kind."""
    return [write_sample(folder, KINDS[n % len(KINDS)], start + n) for n in range(count)]
