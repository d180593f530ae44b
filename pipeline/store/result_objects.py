"""Results as objects (``DOCLANE_RESULT_STORE=s3://bucket/prefix``): the object half of the
result store; PostgreSQL keeps each object's address, size and sha256 in its results row.

The order is what makes it safe: every format's object is uploaded *first* (multipart when
large), under ``<prefix>/<job id>/<attempt>/<format>``, and only then does the transaction that
marks the attempt succeeded insert the rows that name them. So a committed "succeeded" always
has its objects; a worker killed between the two leaves objects no row names, and
:meth:`ObjectResults.orphans` finds them for the reconciler to delete once they are older than
a margin (an upload whose commit is still coming is younger than that). A stale attempt (the
job was cancelled or taken) deletes what it uploaded at once.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import BinaryIO
from urllib.parse import quote
from uuid import UUID

from pipeline.objects.address import ObjectAddress
from pipeline.objects.client import ObjectStore
from pipeline.objects.failures import ObjectError, result_store_error

#: What a result's key looks like under the root: ``<job id>/<attempt>/<format>``. The orphan
#: sweep never touches another key, so a prefix shared with other objects (sources, a bucket's
#: root) loses nothing but results nobody committed.
_RESULT_KEY = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/\d+/[^/]+$"
)
#: Characters encoded at a time when hashing or uploading a result.
SLICE_CHARS = 1 << 20
#: Bytes of an object read at a time for a reader.
READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class StoredObject:
    format: str
    uri: str
    size: int
    sha256: str


class _Utf8Reader(io.RawIOBase):
    """A ``str`` read as UTF-8 bytes a slice at a time: a 50 MB result is never encoded whole."""

    def __init__(self, text: str) -> None:
        self._slices = _utf8_slices(text)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buffer:
            piece = next(self._slices, None)
            if piece is None:
                return 0
            self._buffer = piece
        count = min(len(target), len(self._buffer))
        target[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count


def utf8_stream(text: str) -> BinaryIO:
    """``text`` as a readable binary stream whose ``read(n)`` returns n bytes until the end
    (a raw stream may return fewer, which boto3 would take for the end of a small object)."""
    return io.BufferedReader(_Utf8Reader(text), buffer_size=READ_BYTES)


def _utf8_slices(text: str) -> Iterator[bytes]:
    for start in range(0, len(text), SLICE_CHARS):
        yield text[start : start + SLICE_CHARS].encode()


class ObjectResults:
    """The results under one ``s3://bucket/prefix``, through one :class:`ObjectStore`."""

    def __init__(self, root: str, objects: ObjectStore | None = None) -> None:
        address = ObjectAddress.parse(root)
        prefix = address.key.strip("/")
        self.root = ObjectAddress(address.bucket, f"{prefix}/" if prefix else "")
        self.objects = objects if objects is not None else ObjectStore()
        #: Where the orphan sweep goes on from: each pass lists one bounded page of keys.
        self._orphan_cursor = ""

    def address(self, job_id: UUID, attempt: int, fmt: str) -> ObjectAddress:
        return self.root.child(f"{self.root.key}{job_id}/{attempt}/{quote(fmt, safe='')}")

    def put(self, job_id: UUID, attempt: int, results: Mapping[str, str]) -> list[StoredObject]:
        """Upload every result; E402 (retryable) when the object store fails, the objects
        already uploaded then left for the orphan sweep."""
        stored: list[StoredObject] = []
        for fmt, content in results.items():
            address = self.address(job_id, attempt, fmt)
            digest = hashlib.sha256()
            size = 0
            for piece in _utf8_slices(content):
                digest.update(piece)
                size += len(piece)
            try:
                self.objects.upload(address, utf8_stream(content))
            except ObjectError as exc:
                raise result_store_error(exc, str(address), "uploading") from exc
            stored.append(StoredObject(fmt, str(address), size, digest.hexdigest()))
        return stored

    def write(self, uri: str, out: BinaryIO) -> int:
        """Stream one object into ``out``; the bytes written. E402 when it cannot be read."""
        address = ObjectAddress.parse(uri)
        try:
            _sha, size = self.objects.read_into(address, out, max_bytes=1 << 62)
        except ObjectError as exc:
            raise result_store_error(exc, uri, "reading") from exc
        return size

    def delete(self, uris: Sequence[str]) -> int:
        """Delete objects by address (one bucket's at a time); E402 when the store fails."""
        by_bucket: dict[str, list[str]] = {}
        for uri in uris:
            address = ObjectAddress.parse(uri)
            by_bucket.setdefault(address.bucket, []).append(address.key)
        deleted = 0
        try:
            for bucket, keys in by_bucket.items():
                deleted += self.objects.delete(bucket, keys)
        except ObjectError as exc:
            raise result_store_error(exc, str(self.root), "deleting under") from exc
        return deleted

    def orphans(
        self,
        referenced: Callable[[list[str]], set[str]],
        *,
        min_age: timedelta,
        limit: int,
        now: datetime | None = None,
    ) -> list[str]:
        """Objects under the root older than ``min_age`` that no results row names, among at
        most ``limit`` listed keys; the next call goes on after it (and starts
        over once the listing is done). ``referenced`` answers which of some addresses a row
        names."""
        cutoff = (now or datetime.now(UTC)) - min_age
        page: list[str] = []
        listed = 0
        last = ""
        try:
            for info in self.objects.listing(self.root, start_after=self._orphan_cursor):
                listed += 1
                last = info.key
                if info.modified < cutoff and _RESULT_KEY.match(info.key[len(self.root.key) :]):
                    page.append(str(self.root.child(info.key)))
                if listed >= limit:
                    break
        except ObjectError as exc:
            raise result_store_error(exc, str(self.root), "listing") from exc
        self._orphan_cursor = last if listed >= limit else ""
        if not page:
            return []
        known = referenced(page)
        return [uri for uri in page if uri not in known]
