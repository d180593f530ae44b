"""Moving large results in and out of PostgreSQL without holding extra copies of them.

A result can be tens of megabytes. As an ordinary query parameter, a 50 MB ``str`` exists three
times over at the peak (its UTF-8 form, psycopg's dumped buffer, libpq's output buffer); read back
with ``SELECT``, libpq's input buffer, the result and the ``str`` again. Binary COPY avoids most of
it in both directions:

- in: the row is written in COPY's binary format by hand, the content encoded slice by slice,
  so psycopg sends it in small messages and nothing but one slice is ever copied;
- out: the raw UTF-8 bytes arrive in the driver's buffer and are sliced (``memoryview``, no copy)
  straight into a file.

The binary format: an 11-byte signature, flags and a header-extension length (int32 each), then
per row a field count (int16) and per field a length (int32, -1 for NULL) and its bytes, then a
field count of -1 as the trailer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import BinaryIO
from uuid import UUID

from psycopg import Copy

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_HEADER = _SIGNATURE + struct.pack("!ii", 0, 0)
_TRAILER = struct.pack("!h", -1)
#: Characters encoded at a time when streaming a result in; bounds the extra memory of a write.
ENCODE_SLICE_CHARS = 1 << 20


class CopyFormatError(RuntimeError):
    """The COPY stream is not what a one-column binary COPY looks like."""


def copy_results_in(copy: Copy, job_id: UUID, attempt: int, results: Mapping[str, str]) -> None:
    """Write ``(job_id, format, attempt, content)`` rows to a ``COPY results (...) FROM STDIN
    (FORMAT binary)``, one per format."""
    copy.write(_HEADER)
    for fmt, content in results.items():
        name = fmt.encode()
        copy.write(
            struct.pack("!hi", 4, 16)
            + job_id.bytes
            + struct.pack("!i", len(name))
            + name
            + struct.pack("!ii", 4, attempt)
            + struct.pack("!i", _utf8_length(content))
        )
        for piece in _utf8_slices(content):
            copy.write(piece)
    copy.write(_TRAILER)


def copy_single_value(copy: Copy, out: BinaryIO) -> int | None:
    """Write the only field of the only row of a one-column binary ``COPY ... TO STDOUT`` to
    ``out``; the number of bytes written, or ``None`` when there was no row (or a NULL)."""
    stream = _Stream(copy)
    header = stream.take(len(_HEADER))
    if header[: len(_SIGNATURE)] != _SIGNATURE:
        raise CopyFormatError("not a binary COPY stream")
    stream.take(int.from_bytes(header[-4:], "big"))  # header extension, unused
    fields = int.from_bytes(stream.take(2), "big", signed=True)
    written: int | None = None
    if fields != -1:
        if fields != 1:
            raise CopyFormatError(f"expected one column, got {fields}")
        length = int.from_bytes(stream.take(4), "big", signed=True)
        if length >= 0:
            for piece in stream.pieces(length):
                out.write(piece)
            written = length
    stream.drain()
    return written


def _utf8_length(text: str) -> int:
    if text.isascii():  # O(1) in CPython: the string knows it
        return len(text)
    return sum(len(piece) for piece in _utf8_slices(text))


def _utf8_slices(text: str) -> Iterator[bytes]:
    for start in range(0, len(text), ENCODE_SLICE_CHARS):
        yield text[start : start + ENCODE_SLICE_CHARS].encode()


class _Stream:
    """The COPY data as a byte stream over the driver's chunks, sliced rather than copied."""

    def __init__(self, copy: Copy) -> None:
        self._copy = copy
        self._chunk = memoryview(b"")
        self._offset = 0

    def pieces(self, size: int) -> Iterator[memoryview]:
        while size > 0:
            if self._offset >= len(self._chunk):
                self._chunk, self._offset = memoryview(self._copy.read()), 0
                if not self._chunk:
                    raise CopyFormatError("COPY stream ended early")
            piece = self._chunk[self._offset : self._offset + size]
            self._offset += len(piece)
            size -= len(piece)
            yield piece

    def take(self, size: int) -> bytes:
        return b"".join(bytes(piece) for piece in self.pieces(size))

    def drain(self) -> None:
        while self._copy.read():
            pass
