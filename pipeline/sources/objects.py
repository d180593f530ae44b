"""``s3://`` sources: one object, or every object under a prefix, read like a folder.

At submission an object is judged as a file in a folder is: a prefix's hidden keys (a segment
starting with ``.``) and keys whose extension names no document type are passed over and
counted; a named key is judged strictly. Each object is streamed once (never stored) to hash
it, so dedup works on content as for files, and its size is checked against
``DOCLANE_MAX_SOURCE_BYTES`` from the listing before a byte is read. At the worker the object is
streamed into the attempt's scratch folder the way a URL is downloaded (``keep_download``):
capped, hashed, checked to be what its name says, renamed when whole.

The job keeps the address as its URL (``source_kind`` ``url``); the worker fetches it itself
whatever ``DOCLANE_URL_MODE`` says, since no conversion server reads ``s3://``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from errors import InputError, ObjectNotFound, SourceTooLarge
from pipeline.objects.address import ObjectAddress
from pipeline.objects.client import ObjectInfo, ObjectStore, TooLarge
from pipeline.objects.failures import ObjectError, source_error
from pipeline.sources.downloader import keep_download
from pipeline.sources.formats import format_for_name
from pipeline.sources.local import check_size, require_known_suffix
from pipeline.sources.models import Candidate, Rejected, SourceInfo
from pipeline.sources.pathmap import PathMap
from pipeline.sources.settings import SourceSettings

SKIPPED_HIDDEN = "hidden"
SKIPPED_UNSUPPORTED = "unsupported"


class _Discard:
    """A sink for hashing an object without keeping it."""

    def write(self, data: bytes) -> int:
        return len(data)


class ObjectSources:
    """Expands and fetches ``s3://`` sources through one :class:`ObjectStore` (built from the
    environment on first use, so a submission without one needs no credentials)."""

    def __init__(self, settings: SourceSettings, store: ObjectStore | None = None) -> None:
        self.settings = settings
        self._store = store

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            self._store = ObjectStore()
        return self._store

    def expand(
        self,
        source: str,
        emit: Callable[[Candidate | Rejected], None],
        skip: Callable[[str], None],
    ) -> None:
        """Every object the address names, as candidates and rejections, in key order. A key
        with no object but objects under ``key/`` is read as that prefix (``s3://b/in`` as
        ``s3://b/in/``), as a folder named without its slash is."""
        shown = source.strip()
        try:
            address = ObjectAddress.parse(shown)
            if not address.is_prefix:
                try:
                    info = self.store.head(address)
                except ObjectError as exc:
                    if source_error(exc, shown).code != "E111":
                        raise
                    address = address.child(address.key + "/")
                else:
                    emit(Candidate(source, self._check(address, info, explicit=True)))
                    return
            found = False
            for info in self.store.listing(address):
                found = True
                self._listed(address.child(info.key), info, emit, skip)
        except InputError as exc:
            emit(Rejected(source, exc))
            return
        except ObjectError as exc:
            emit(Rejected(source, source_error(exc, shown)))
            return
        if not found:
            reason = "no such bucket or key" if not shown.endswith("/") else "empty prefix"
            emit(
                Rejected(
                    source,
                    ObjectNotFound(
                        f"{shown}: {reason}, and no object under it",
                        detail={"source": shown, "reason": reason, "transient": False},
                    ),
                )
            )

    def _listed(
        self,
        address: ObjectAddress,
        info: ObjectInfo,
        emit: Callable[[Candidate | Rejected], None],
        skip: Callable[[str], None],
    ) -> None:
        name = PurePosixPath(info.key)
        if info.key.endswith("/"):
            return  # a "folder" marker some tools write: no document
        if any(part.startswith(".") for part in name.parts):
            skip(SKIPPED_HIDDEN)
        elif format_for_name(name.name) is None:
            skip(SKIPPED_UNSUPPORTED)
        else:
            try:
                emit(Candidate(str(address), self._check(address, info, explicit=False)))
            except InputError as exc:
                emit(Rejected(str(address), exc))
            except ObjectError as exc:
                emit(Rejected(str(address), source_error(exc, str(address))))

    def _check(self, address: ObjectAddress, info: ObjectInfo, *, explicit: bool) -> SourceInfo:
        label = str(address)
        fmt = require_known_suffix(PurePosixPath(address.key).name, label)
        maximum = int(self.settings.max_source_bytes)
        check_size(info.size, maximum, label)
        try:
            sha256, size = self.store.read_into(address, _Discard(), max_bytes=maximum)
        except TooLarge:
            raise _too_large(label, maximum) from None
        return SourceInfo(
            kind="url", uri=label, server_uri=label, size_bytes=size, sha256=sha256, format=fmt
        )

    def fetch(self, uri: str, inbox: Path, path_map: PathMap) -> SourceInfo:
        """Stream the object into ``inbox`` (capped, hashed, checked); E111, E112, E107, E103,
        E102 or E106 as for a download."""
        address = ObjectAddress.parse(uri)
        inbox.mkdir(parents=True, exist_ok=True)
        maximum = int(self.settings.max_source_bytes)

        def fill(part: BinaryIO) -> tuple[str, int]:
            try:
                return self.store.read_into(address, part, max_bytes=maximum)
            except TooLarge:
                raise _too_large(uri, maximum) from None
            except ObjectError as exc:
                raise source_error(exc, uri) from exc

        final, fmt, digest, size = keep_download(
            inbox, uri, fill, maximum=maximum, content_type=None, name_path="/" + address.key
        )
        return SourceInfo(
            kind="url",
            uri=uri,
            server_uri=path_map.to_server_path(final),
            path=final,
            size_bytes=size,
            sha256=digest,
            format=fmt,
        )


def _too_large(label: str, maximum: int) -> SourceTooLarge:
    return SourceTooLarge(
        f"{label}: the object exceeds the maximum of {maximum} bytes "
        "(DOCLANE_MAX_SOURCE_BYTES); read stopped",
        detail={"source": label, "reason": "too large", "max_bytes": maximum},
    )
