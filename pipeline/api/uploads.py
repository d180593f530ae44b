"""Uploads streamed straight into the inbox folder, never held whole (in memory or spooled).

``POST /v1/jobs`` with ``multipart/form-data``: the field ``file`` is written, as its bytes
arrive, to ``<inbox>/uploads/<uuid>/<its file name>`` (a folder workers and the server share,
always allowed whatever ``DOCLANE_ALLOWED_ROOTS`` says: doclane wrote the file itself);
``to`` and ``priority`` are small form fields. A request whose Content-Length already says it is
too big is refused before a byte is read; otherwise the count of bytes written is checked as
they come, and the partial file is deleted the moment it passes ``DOCLANE_MAX_SOURCE_BYTES``
(E103). The parsing itself is python-multipart's streaming parser, fed chunk by chunk.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from errors import EmptySource, SourceTooLarge
from pipeline.sources.settings import UPLOADS_FOLDER

#: Form fields besides the file are a few bytes (``to``, ``priority``); more is not a form.
_MAX_FIELD_BYTES = 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


class BadUpload(ValueError):
    """The request is not the multipart form this endpoint takes."""


@dataclass
class Upload:
    path: Path
    size_bytes: int
    fields: dict[str, str] = field(default_factory=dict)


def safe_name(name: str) -> str:
    """The file name's last component, with nothing that could climb out of its folder."""
    base = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return base[:200] or "upload"


class _Receiver:
    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.fields: dict[str, str] = {}
        self.path: Path | None = None
        self.size = 0
        self._headers: dict[str, bytes] = {}
        self._header_field = b""
        self._header_value = b""
        self._name = ""
        self._file: IO[bytes] | None = None
        self._value = bytearray()

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field_data,
            "on_header_value": self._header_value_data,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
        }

    def _part_begin(self) -> None:
        self._headers, self._header_field, self._header_value = {}, b"", b""
        self._value = bytearray()

    def _header_field_data(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        self._headers[self._header_field.decode("latin-1").lower()] = self._header_value
        self._header_field, self._header_value = b"", b""

    def _headers_finished(self) -> None:
        _, params = parse_options_header(self._headers.get("content-disposition", b""))
        self._name = params.get(b"name", b"").decode("utf-8", "replace")
        filename = params.get(b"filename")
        if self._name == "file":
            if self.path is not None:
                raise BadUpload("send one document per request (one field 'file')")
            name = safe_name(filename.decode("utf-8", "replace") if filename else "upload")
            self.folder.mkdir(parents=True, exist_ok=True)
            self.path = self.folder / name
            self._file = self.path.open("wb")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._file is not None:
            self.size += end - start
            if self.size > self.max_bytes:
                raise SourceTooLarge(
                    f"the upload is larger than the maximum of {self.max_bytes} bytes",
                    detail={"max_bytes": self.max_bytes},
                )
            self._file.write(data[start:end])
        else:
            self._value += data[start:end]
            if len(self._value) > _MAX_FIELD_BYTES:
                raise BadUpload(f"form field {self._name!r} is too long")

    def _part_end(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        elif self._name:
            self.fields[self._name] = self._value.decode("utf-8", "replace")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


async def receive_upload(
    content_type: str,
    content_length: int | None,
    chunks: AsyncIterator[bytes],
    *,
    inbox: Path,
    max_bytes: int,
) -> Upload:
    """Write the form's ``file`` into a new folder under ``inbox/uploads``; E103 past the cap,
    E106 for an empty document, :class:`BadUpload` for a form without a file."""
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise BadUpload("multipart/form-data without a boundary")
    # The form's own overhead (boundaries, headers, small fields) is a few KiB at most.
    if content_length is not None and content_length > max_bytes + 64 * 1024:
        raise SourceTooLarge(
            f"the upload ({content_length} bytes) is larger than the maximum of {max_bytes} bytes",
            detail={"max_bytes": max_bytes, "content_length": content_length},
        )
    folder = inbox / UPLOADS_FOLDER / uuid.uuid4().hex
    receiver = _Receiver(folder, max_bytes)
    parser = MultipartParser(boundary, cast(Any, receiver.callbacks()))
    try:
        async for chunk in chunks:
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as exc:
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise BadUpload(f"not a valid multipart form: {exc}") from exc
    except BaseException:
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    receiver.close()
    if receiver.path is None:
        shutil.rmtree(folder, ignore_errors=True)
        raise BadUpload("the form has no field 'file' with the document")
    if receiver.size == 0:
        shutil.rmtree(folder, ignore_errors=True)
        name = receiver.path.name
        raise EmptySource(f"the uploaded document {name!r} is empty", detail=name)
    return Upload(receiver.path, receiver.size, receiver.fields)
