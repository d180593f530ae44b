"""Validating a local file before it becomes a job, and again before the worker converts it.

The checks run in the order that answers the submitter's real question first and reads the
least: where it is (E105, decided on the resolved path so a link cannot lead out of the allowed
roots), whether it is there (E101), what its name says (E102), how big it is (E106, E103), what
its bytes say (E102), and finally its SHA-256, streamed in chunks so a 200 MB source costs one
chunk of memory. The file is opened once and everything after the name check reads that one
open file, so a file swapped between the checks cannot slip past them.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import BinaryIO, Final

from errors import (
    EmptySource,
    PathOutsideRoots,
    SourceNotFound,
    SourceTooLarge,
    UnsupportedFormat,
)
from pipeline.sources.formats import (
    HEAD_BYTES,
    SUFFIXES,
    UTF8_FORMATS,
    ContentNotItsFormat,
    DocumentFormat,
    check_content,
    format_for_name,
)
from pipeline.sources.models import SourceInfo
from pipeline.sources.pathmap import PathMap
from pipeline.sources.settings import SourceSettings

#: Bytes read per step while hashing.
CHUNK_BYTES: Final = 1024 * 1024


def validate_file(
    path: str | os.PathLike[str],
    settings: SourceSettings,
    *,
    label: str | None = None,
    path_map: PathMap | None = None,
    resolved_path: str | None = None,
) -> SourceInfo:
    """Check one local file and describe it; raise the E1xx error that explains a refusal.

    ``label`` is how messages name the source (what the submitter wrote); the returned ``uri``
    is the resolved absolute path, which is what the server will be given. ``resolved_path``
    is ``os.path.realpath(path)`` when the caller has it already (resolving walks every
    component of the path: a tenth of a submission's time).

    Paths stay plain ``str`` until the returned ``SourceInfo.path``: six ``pathlib`` objects
    per file were a third of the checks' own time (it runs for every file of a submission,
    and again in the worker for every job).
    """
    name = label if label is not None else os.fspath(path)
    absolute = os.path.abspath(os.path.expanduser(os.fspath(path)))
    resolved = resolved_path if resolved_path is not None else os.path.realpath(absolute)
    check_allowed_roots(resolved, settings.file_roots, label=name, given=absolute)
    _require_regular_file(absolute, resolved, name)
    fmt = require_known_suffix(os.path.basename(resolved), name)
    with _open_source(resolved, name) as stream:
        digest, hashed = _check_and_hash(stream, fmt, settings, name)
    check_size(hashed, settings.max_source_bytes, name)  # it may have changed since fstat
    mapper = path_map if path_map is not None else settings.path_mapper()
    return SourceInfo(
        kind="file",
        uri=resolved,
        # No mapping: the server's name is the resolved path itself (already normalized).
        server_uri=mapper.to_server_path(resolved) if mapper else resolved,
        path=Path(resolved),
        size_bytes=hashed,
        sha256=digest,
        format=fmt,
    )


def _require_regular_file(absolute: str, resolved: str, name: str) -> None:
    """E101 unless ``absolute`` exists and leads (as ``resolved``) to a regular file."""
    if not os.path.lexists(absolute):
        raise SourceNotFound(f"{name}: no such file", detail=_detail(name, "missing"))
    try:
        info = os.stat(resolved)
    except OSError as exc:
        reason = "a link to a missing file" if os.path.islink(absolute) else exc.strerror
        raise SourceNotFound(f"{name}: {reason}", detail=_detail(name, "unreadable")) from exc
    if stat.S_ISDIR(info.st_mode):
        raise SourceNotFound(
            f"{name}: is a folder, not a file", detail=_detail(name, "is a folder")
        )
    if not stat.S_ISREG(info.st_mode):
        raise SourceNotFound(
            f"{name}: not a regular file", detail=_detail(name, "not a regular file")
        )


def _open_source(resolved: str, name: str) -> BinaryIO:
    """The file opened for reading, or E101 saying why it cannot be."""
    try:
        return open(resolved, "rb")
    except OSError as exc:
        raise SourceNotFound(
            f"{name}: cannot be read ({exc.strerror})", detail=_detail(name, "unreadable")
        ) from exc


def _check_and_hash(
    stream: BinaryIO, fmt: DocumentFormat, settings: SourceSettings, name: str
) -> tuple[str, int]:
    """Size (E103) and content (E102) checked on the open file, then its digest and size as
    hashed; one open file for all three, so each check reads what the others read."""
    size = os.fstat(stream.fileno()).st_size
    check_size(size, settings.max_source_bytes, name)
    head = stream.read(HEAD_BYTES)
    try:
        check_content(fmt, head, stream)
    except ContentNotItsFormat as exc:
        raise UnsupportedFormat(
            f"{name}: {exc}", detail=_detail(name, str(exc), format=fmt.value)
        ) from None
    stream.seek(0)
    return hash_stream(stream, fmt, settings.max_source_bytes, name)


def check_allowed_roots(
    resolved: str | Path,
    roots: Sequence[Path],
    *,
    label: str,
    given: str | Path | None = None,
) -> None:
    """E105 unless ``resolved`` (links already followed, normalized) lies in one of ``roots``."""
    if not roots:
        return
    target = PurePath(resolved)
    if any(target.is_relative_to(root) for root in roots):
        return
    shown = os.fspath(resolved)
    via = f" (it leads to {shown})" if given is not None and os.fspath(given) != shown else ""
    allowed = ", ".join(str(root) for root in roots)
    raise PathOutsideRoots(
        f"{label}: outside the allowed roots{via}; allowed: {allowed}",
        detail={"source": label, "resolved": shown, "allowed_roots": allowed},
    )


def require_known_suffix(file_name: str, label: str) -> DocumentFormat:
    """The format ``file_name`` (the last part of a path) promises; E102 when none."""
    fmt = format_for_name(file_name)
    if fmt is None:
        suffix = PurePath(file_name).suffix
        known = ", ".join(sorted(SUFFIXES))
        raise UnsupportedFormat(
            f"{label}: {suffix or 'no extension'} is not a supported document type "
            f"(supported: {known})",
            detail=_detail(label, "unsupported extension", suffix=suffix),
        )
    return fmt


def check_size(size: int, maximum: int, label: str) -> None:
    if size == 0:
        raise EmptySource(f"{label}: the file is empty (0 bytes)", detail=_detail(label, "empty"))
    if size > maximum:
        raise SourceTooLarge(
            f"{label}: {size} bytes is more than the maximum of {maximum} bytes "
            "(DOCLANE_MAX_SOURCE_BYTES)",
            detail=_detail(label, "too large", size_bytes=size, max_bytes=maximum),
        )


def hash_stream(stream: BinaryIO, fmt: DocumentFormat, maximum: int, label: str) -> tuple[str, int]:
    """SHA-256 and length of the rest of ``stream``, chunk by chunk.

    Markdown and CSV are also decoded as UTF-8 on the way (the head check saw only the start),
    so a file that turns binary halfway is refused here rather than by the server.
    """
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")() if fmt in UTF8_FORMATS else None
    total = 0
    while chunk := stream.read(CHUNK_BYTES):
        total += len(chunk)
        if total > maximum:
            check_size(total, maximum, label)
        digest.update(chunk)
        if decoder is not None:
            _decode(decoder, chunk, fmt, label, final=False)
    if decoder is not None:
        _decode(decoder, b"", fmt, label, final=True)
    return digest.hexdigest(), total


def _decode(
    decoder: codecs.IncrementalDecoder, data: bytes, fmt: DocumentFormat, label: str, *, final: bool
) -> None:
    try:
        decoder.decode(data, final=final)
    except UnicodeDecodeError as exc:
        reason = f"{fmt.label} must be UTF-8 text, and this is not ({exc.reason})"
        raise UnsupportedFormat(
            f"{label}: {reason}", detail=_detail(label, reason, format=fmt.value)
        ) from None


def _detail(label: str, reason: str, **extra: object) -> dict[str, object]:
    return {"source": label, "reason": reason, **extra}
