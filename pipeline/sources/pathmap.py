"""Path mapping between a worker's view of a shared volume and the Docling server's view.

The server reads ``source`` itself, so a file the worker validated at ``/srv/inbox/a.docx`` must
be named as the server sees it (``/data/inbox/a.docx`` inside its container), and the files the
server writes (``save_docling_document``'s md/json) must be named back as the worker sees them.
``DOCLANE_PATH_MAP=/worker/path:/server/path[,/other/worker:/other/server]``; the longest
matching prefix wins, matching whole path components (``/data`` never matches ``/data2``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath


class PathMapError(ValueError):
    """``DOCLANE_PATH_MAP`` is malformed (a configuration error, reported at start-up)."""


@dataclass(frozen=True, slots=True)
class PathMapping:
    """One shared volume: the same folder as the worker and as the server name it."""

    worker: PurePosixPath
    server: PurePosixPath


def parse_path_map(text: str) -> tuple[PathMapping, ...]:
    """Parse ``/w:/s,/w2:/s2``; both sides must be absolute; empty text means no mapping."""
    mappings: list[PathMapping] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        worker, sep, server = item.partition(":")
        if not sep or not worker.strip() or not server.strip():
            raise PathMapError(
                f"DOCLANE_PATH_MAP entry {item!r} is not of the form /worker/path:/server/path"
            )
        pair = PathMapping(_absolute(worker.strip(), item), _absolute(server.strip(), item))
        mappings.append(pair)
    return tuple(mappings)


def _absolute(path: str, item: str) -> PurePosixPath:
    pure = PurePosixPath(os.path.normpath(path))
    if not pure.is_absolute():
        raise PathMapError(f"DOCLANE_PATH_MAP entry {item!r}: {path!r} is not an absolute path")
    return pure


class PathMap:
    """Both directions of the mapping; with no mappings both directions are the identity."""

    def __init__(self, mappings: Iterable[PathMapping] = ()) -> None:
        self.mappings: tuple[PathMapping, ...] = tuple(mappings)
        # A validated source is named by its resolved path (links followed), so a worker prefix
        # that is itself a link (/data -> /mnt/disk1/data) must also match in its resolved form.
        forward: list[PathMapping] = []
        for mapping in self.mappings:
            forward.append(mapping)
            resolved = PurePosixPath(os.path.realpath(mapping.worker))
            if resolved != mapping.worker:
                forward.append(PathMapping(resolved, mapping.server))
        self._forward = tuple(forward)

    @classmethod
    def parse(cls, text: str) -> PathMap:
        return cls(parse_path_map(text))

    def __bool__(self) -> bool:
        return bool(self.mappings)

    def to_server_path(self, path: str | os.PathLike[str]) -> str:
        """The server's name for a worker path; unchanged when no mapping covers it."""
        pure = PurePosixPath(os.fspath(path))
        best = _longest(pure, ((m.worker, m.server) for m in self._forward))
        return str(pure) if best is None else str(best)

    def to_worker_path(self, path: str | os.PathLike[str]) -> str:
        """The worker's name for a path the server wrote; unchanged when no mapping covers it."""
        pure = PurePosixPath(os.fspath(path))
        best = _longest(pure, ((m.server, m.worker) for m in self.mappings))
        return str(pure) if best is None else str(best)


def _longest(
    path: PurePosixPath, pairs: Iterable[tuple[PurePosixPath, PurePosixPath]]
) -> PurePosixPath | None:
    """``path`` with the longest matching ``from`` prefix replaced by its ``to``."""
    match: tuple[PurePosixPath, PurePosixPath] | None = None
    for source, target in pairs:
        if path.is_relative_to(source) and (
            match is None or len(source.parts) > len(match[0].parts)
        ):
            match = (source, target)
    if match is None:
        return None
    return match[1].joinpath(path.relative_to(match[0]))


__all__ = ["PathMap", "PathMapError", "PathMapping", "parse_path_map"]
