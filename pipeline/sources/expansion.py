"""Expanding a submission (files, folders, globs, URLs, ``s3://`` objects and prefixes) into
sources that may become jobs.

What the submitter names explicitly is judged strictly: a named ``notes.txt`` is rejected with
E102, because they asked for it. What a folder or a glob merely contains is judged leniently:
dot-files, dot-folders and files whose extension names no document type are passed over and
only counted (``Expansion.skipped``), because a folder of documents routinely holds a
``.DS_Store`` or a ``README.txt`` that nobody meant to convert. A file that *claims* to be a
document (``.docx``) but is not is rejected wherever it was found.

The order is the submission's, and within a folder, sorted by name, a folder's own files before
its subfolders', so the same submission always gives the same jobs in the same order. A file
reached twice (named and inside a named folder, or through a link) is listed once.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import httpx

from errors import InputError, SourceNotFound
from pipeline.objects.address import is_object_address
from pipeline.sources.addresses import Resolver
from pipeline.sources.formats import format_for_name
from pipeline.sources.local import check_allowed_roots, validate_file
from pipeline.sources.models import Candidate, Expansion, Rejected
from pipeline.sources.objects import ObjectSources
from pipeline.sources.pathmap import PathMap
from pipeline.sources.settings import SourceSettings
from pipeline.sources.urls import check_url, looks_like_url

_GLOB_MAGIC: Final = re.compile(r"[*?[]")

SKIPPED_HIDDEN: Final = "hidden"
SKIPPED_UNSUPPORTED: Final = "unsupported"
SKIPPED_LINKED_FOLDER: Final = "linked folder"


class _Expander:
    def __init__(
        self,
        settings: SourceSettings,
        cwd: Path,
        resolver: Resolver | None,
        path_map: PathMap,
        on_item: Callable[[Candidate | Rejected], None] | None = None,
        *,
        objects: ObjectSources | None = None,
    ) -> None:
        self.settings = settings
        self.objects = objects if objects is not None else ObjectSources(settings)
        self.cwd = cwd
        self.resolver = resolver
        self.path_map = path_map
        self.result = Expansion()
        self._emit = on_item if on_item is not None else self.result.items.append
        self._seen: set[str] = set()

    def source(self, source: str) -> None:
        text = source.strip()
        if not text:
            self._reject(source, SourceNotFound("(empty): an empty source name"))
        elif "\x00" in text:  # no path or URL holds one; the OS would refuse it with ValueError
            shown = text.replace("\x00", "\\x00")
            self._reject(
                source,
                SourceNotFound(
                    f"{shown}: a source name cannot contain a NUL byte",
                    detail={"source": shown, "reason": "NUL byte"},
                ),
            )
        elif is_object_address(text):
            if self._first("object:" + text):
                self.objects.expand(source, self._emit, self.result.skip)
        elif looks_like_url(text):
            self._url(source, text)
        else:
            absolute = self._absolute(text)
            if _GLOB_MAGIC.search(text) and not os.path.lexists(absolute):
                self._glob(source, absolute)
            elif absolute.is_dir():
                self._folder(source, text, absolute)
            else:
                self._file(source, text, absolute, explicit=True)

    def _absolute(self, text: str) -> Path:
        return Path(os.path.normpath(self.cwd / os.path.expanduser(text)))

    def _url(self, source: str, text: str) -> None:
        try:
            key = "url:" + str(httpx.URL(text))
        except (httpx.InvalidURL, ValueError):
            key = "url:" + text
        if not self._first(key):
            return
        try:
            info = check_url(text, self.settings, resolver=self.resolver)
        except InputError as exc:
            self._reject(source, exc)
        else:
            self._emit(Candidate(source, info))

    def _glob(self, source: str, pattern: Path) -> None:
        matches = sorted(glob.glob(str(pattern), recursive=True))
        if not matches:
            self._reject(
                source,
                SourceNotFound(
                    f"{source}: no file matches this pattern",
                    detail={"source": source, "reason": "no match"},
                ),
            )
            return
        for match in matches:
            if os.path.isdir(match):
                self._folder(match, match, Path(match))
            else:
                self._file(match, match, match, explicit=False)

    def _folder(self, source: str, text: str, folder: Path) -> None:
        real = os.path.realpath(folder)
        try:
            check_allowed_roots(Path(real), self.settings.file_roots, label=source, given=folder)
        except InputError as exc:
            self._reject(source, exc)
            return
        for path, relative, resolved in _walk(os.fspath(folder), real, self.result):
            label = os.path.join(text, relative)
            self._file(label, label, path, explicit=False, resolved=resolved)

    def _file(
        self,
        source: str,
        label: str,
        path: str | Path,
        *,
        explicit: bool,
        resolved: str | None = None,
    ) -> None:
        """``resolved`` is the file's real path when the walk knows it already."""
        if not explicit and format_for_name(os.path.basename(path)) is None:
            self.result.skip(SKIPPED_UNSUPPORTED)
            return
        if resolved is None:
            resolved = os.path.realpath(os.path.expanduser(path))
        if not self._first("file:" + resolved):
            return
        try:
            info = validate_file(
                path, self.settings, label=label, path_map=self.path_map, resolved_path=resolved
            )
        except InputError as exc:
            self._reject(source, exc)
        except OSError as exc:  # a race with the file system the checks did not foresee
            self._reject(
                source,
                SourceNotFound(
                    f"{label}: cannot be read ({exc})",
                    detail={"source": label, "reason": "unreadable"},
                ),
            )
        else:
            self._emit(Candidate(source, info))

    def _first(self, key: str) -> bool:
        if key in self._seen:
            self.result.duplicates += 1
            return False
        self._seen.add(key)
        return True

    def _reject(self, source: str, error: InputError) -> None:
        self._emit(Rejected(source, error))


def _walk(
    folder: str, real: str, result: Expansion, within: str = ""
) -> Iterator[tuple[str, str, str]]:
    """Files under ``folder`` (path, path relative to the walk's first folder, real path),
    sorted, a folder's files before its subfolders'; no dot-entries.

    Links to folders are not followed (a link loop would never end, and ``find`` does the
    same); links to files are listed and then judged by where they lead. So no folder the walk
    enters is a link, and a file that is none has for its real path ``real`` (the first
    folder's) joined with its relative path, and only a link is resolved (not every component
    of every file again). The entries' types come with the
    listing (no stat each); an unreadable folder is passed over, as ``os.walk`` does. Paths
    are ``str`` (``pathlib`` objects per file cost more than the walk itself).
    """
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return
    folders: list[tuple[str, str]] = []
    for entry in entries:
        relative = os.path.join(within, entry.name) if within else entry.name
        if entry.name.startswith("."):
            result.skip(SKIPPED_HIDDEN)
        elif _is_dir(entry):
            if entry.is_symlink():
                result.skip(SKIPPED_LINKED_FOLDER)
            else:
                folders.append((entry.path, relative))
        else:
            linked = entry.is_symlink()
            resolved = os.path.realpath(entry.path) if linked else os.path.join(real, relative)
            yield entry.path, relative, resolved
    for path, relative in folders:
        yield from _walk(path, real, result, relative)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # a link to a folder counts, as in os.walk
    except OSError:
        return False


def expand(
    sources: Sequence[str],
    settings: SourceSettings,
    *,
    cwd: Path | None = None,
    resolver: Resolver | None = None,
    path_map: PathMap | None = None,
    on_item: Callable[[Candidate | Rejected], None] | None = None,
    objects: ObjectSources | None = None,
) -> Expansion:
    """Turn what a submitter named into candidates and rejections, one rejection never stopping
    the rest. Files are fully validated (and hashed); URLs are pre-checked (scheme, addresses).

    With ``on_item`` each candidate or rejection is handed over as soon as it is known, in the
    same order, and not kept (the result then only counts what was skipped and found twice):
    a submitter of a million files has the first ones converting while it hashes the rest.
    ``s3://`` sources go through ``objects`` (by default one built from the AWS_* environment
    the first time one is named).
    """
    expander = _Expander(
        settings,
        Path(cwd) if cwd is not None else Path.cwd(),
        resolver,
        path_map if path_map is not None else settings.path_mapper(),
        on_item,
        objects=objects,
    )
    for source in sources:
        expander.source(source)
    return expander.result
