"""What validation and fetching produce: a checked source, or a rejection with its E1xx code."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from errors import InputError
from pipeline.sources.formats import DocumentFormat

SourceKindName = Literal["file", "url"]


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A source that passed validation.

    ``uri`` is what the job row keeps: the resolved absolute path of a file, or the URL as
    submitted. ``path`` is the file the worker can read (the file itself, or a URL's download in
    the inbox; None for a URL not fetched yet). ``server_uri`` is what the Docling server is
    given: ``path`` through ``DOCLANE_PATH_MAP``, or the URL itself when nothing was fetched.
    Size, hash and format are None only for a URL not fetched yet.
    """

    kind: SourceKindName
    uri: str
    server_uri: str
    path: Path | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    format: DocumentFormat | None = None
    #: For a download: the URL after redirects, and the address the body came from.
    final_url: str | None = None
    peer_address: str | None = None

    @property
    def suffix(self) -> str:
        """The canonical suffix of the format (".docx"), "" when unknown."""
        return self.format.suffix if self.format is not None else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "uri": self.uri,
            "server_uri": self.server_uri,
            "path": str(self.path) if self.path is not None else None,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
            "format": self.format.value if self.format is not None else None,
            "final_url": self.final_url,
            "peer_address": self.peer_address,
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A source that may become a job. ``source`` is what the submitter wrote that led here."""

    source: str
    info: SourceInfo


@dataclass(frozen=True, slots=True)
class Rejected:
    """A source that may not become a job, and why; never stops the other sources."""

    source: str
    error: InputError

    @property
    def code(self) -> str:
        return self.error.code

    @property
    def message(self) -> str:
        return self.error.message

    def masked(self, shown: Callable[[str], str]) -> Rejected:
        """The same rejection as it may be shown: ``shown`` applied to the source and message
        (a URL's secrets masked); the error's detail, which quotes the source, is left out."""
        return Rejected(shown(self.source), type(self.error)(shown(self.message)))

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "code": self.code, "message": self.message}


@dataclass(slots=True)
class Expansion:
    """The outcome of expanding a submission, in submission order.

    Iterating gives the items, so it reads as the ``list[Candidate | Rejected]`` it wraps.
    ``skipped`` counts files inside folders and glob matches that were passed over silently:
    ``hidden`` (a dot-file or dot-folder) and ``unsupported`` (an extension that names no
    document type). ``duplicates`` counts sources that resolved to one already listed.
    """

    items: list[Candidate | Rejected] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0

    def __iter__(self) -> Iterator[Candidate | Rejected]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def candidates(self) -> list[Candidate]:
        return [item for item in self.items if isinstance(item, Candidate)]

    @property
    def rejected(self) -> list[Rejected]:
        return [item for item in self.items if isinstance(item, Rejected)]

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
