"""Settings of source validation and fetching: what may be read, how big, and from where."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ByteSize, Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from pipeline.sources.pathmap import PathMap, PathMapping, parse_path_map
from pipeline.support.settings import CommaList, Section

UrlMode = Literal["download", "server"]

DEFAULT_MAX_SOURCE_BYTES = 200 * 1024 * 1024
DEFAULT_INBOX_DIR = Path("~/.cache/doclane/inbox")
#: The inbox's folder of uploaded documents (``POST /v1/jobs`` with a file).
UPLOADS_FOLDER = "uploads"


def _pathsep_as_comma(value: Any) -> Any:
    """Folders may also be separated as in PATH (``:``), but not inside a JSON list."""
    if isinstance(value, str) and not value.lstrip().startswith("["):
        return value.replace(os.pathsep, ",")
    return value


class SourceSettings(Section):
    """One per process.

    ``allow_private_urls`` unlocks loopback and private networks (RFC 1918, IPv6 unique-local,
    carrier-grade NAT) for a fleet that fetches from its own intranet; link-local addresses,
    cloud metadata endpoints, multicast, unspecified and reserved addresses stay refused
    whatever it says, because nothing legitimate serves documents there.
    """

    # An empty variable is a value here (DOCLANE_ALLOWED_ROOTS=: any path).
    model_config = SettingsConfigDict(env_ignore_empty=False)

    #: Folders sources must lie in (after following links); empty means any path. The API's
    #: uploads folder (``<inbox>/uploads``) is always allowed besides: uploads are doclane's
    #: own files. From the environment: separated by commas or the OS path separator (``:``),
    #: or JSON.
    allowed_roots: Annotated[CommaList[Path], BeforeValidator(_pathsep_as_comma)] = ()
    #: The largest source accepted, files and downloads alike ("200MB", "1GiB" or bytes).
    max_source_bytes: ByteSize = Field(default=ByteSize(DEFAULT_MAX_SOURCE_BYTES), gt=0)
    allow_private_urls: bool = False
    #: ``download``: the worker fetches a URL into the inbox and converts the file (docling-mcp
    #: refuses URLs in its local mode); ``server``: the URL goes to a server that fetches it.
    url_mode: UrlMode = "download"
    #: Where downloaded URL sources are kept; it must be readable by the server (path map).
    inbox_dir: Path = DEFAULT_INBOX_DIR
    #: ``/worker/path:/server/path``, several separated by commas.
    path_map: Annotated[tuple[PathMapping, ...], NoDecode] = ()
    #: The whole download's deadline, and each connect/read's.
    download_timeout_s: float = Field(default=120.0, gt=0)
    max_redirects: int = Field(default=5, ge=0, le=20)

    @field_validator("allowed_roots", mode="after")
    @classmethod
    def _resolve_roots(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        # Sources are compared after resolving links, so the roots must be resolved too.
        return tuple(Path(os.path.realpath(root.expanduser())) for root in value)

    @field_validator("path_map", mode="before")
    @classmethod
    def _parse_path_map(cls, value: Any) -> Any:
        return parse_path_map(value) if isinstance(value, str) else value

    @field_validator("inbox_dir", mode="after")
    @classmethod
    def _expand_inbox(cls, value: Path) -> Path:
        return Path(os.path.abspath(value.expanduser()))

    @property
    def uploads_dir(self) -> Path:
        """Where the API stores uploaded documents, one folder each."""
        return self.inbox_dir / UPLOADS_FOLDER

    @cached_property  # resolving walks the path: once per process, not once per file
    def file_roots(self) -> tuple[Path, ...]:
        """The folders a file source may lie in: the allowed roots and the uploads folder (links
        followed); empty when any path is allowed."""
        if not self.allowed_roots:
            return ()
        return (*self.allowed_roots, Path(os.path.realpath(self.uploads_dir)))

    def path_mapper(self) -> PathMap:
        return PathMap(self.path_map)
