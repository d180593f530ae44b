"""Sweeping the inbox's uploads folder of uploads that no job names.

An upload is written to ``<inbox>/uploads/<folder>/<name>`` and submitted as that file. The API
removes the folder at once when no new job reads it (refused, or deduplicated to a job made
before); one is left behind when its submission did not get that far (the API process killed
between the upload and its answer, a database lost mid-submission). This sweep removes such a
folder once two things hold, checked in this order:

1. nothing in it was written for ``DOCLANE_RECONCILE_UPLOAD_MIN_AGE_S`` (an hour by default):
   the newest modification time of the folder and its files, so an upload still streaming in,
   however slowly, is young, as is one whose submission is under way;
2. no job names any of its files (``source_uri``, the resolved path a submission stores).

The race is with a submission in progress: the sweep may read "no job" just before that
submission commits its job. Between an upload's last byte and its job's commit there is one read
of the file (its hash) and one transaction, seconds, so the age guard makes that race need a
submission stalled for the whole hour, which the sweep cannot tell apart from a dead one without
a lock shared with every submission (a cost on every upload, for a case that costs, when it
happens, one job failed with E101 "not found", never a job silently lost or converted wrong).
Locking each upload against the sweep, or a table of uploads in progress, was judged not worth
that. A folder that a job names is never removed, whatever its age.

Each pass examines at most ``DOCLANE_RECONCILE_BATCH`` folders, picked at random among all, so
that uploads that jobs name (most of them, kept as long as their jobs) do not hold up the rest.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pipeline.sources.settings import UPLOADS_FOLDER

log = logging.getLogger("doclane.reconcile")

#: The folder name an upload gets (``pipeline.api.uploads``: a uuid4's hex).
_UPLOAD_FOLDER = re.compile(r"^[0-9a-f]{32}$")

NamedUploads = Callable[[list[str]], Iterable[str]]


def sweep_uploads(
    inbox_dir: Path, named: NamedUploads, *, min_age_s: float, limit: int
) -> list[Path]:
    """Remove upload folders that no job names and nothing wrote to for ``min_age_s``;
    ``named`` tells which of a list of files some job names."""
    uploads = Path(os.path.realpath(inbox_dir / UPLOADS_FOLDER))
    try:
        names = [n for n in os.listdir(uploads) if _UPLOAD_FOLDER.match(n)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    if len(names) > limit:
        names = random.sample(names, limit)
    cutoff = time.time() - min_age_s
    candidates: dict[Path, list[str]] = {}
    for name in names:
        folder = uploads / name
        files = _quiet_since(folder, cutoff)
        if files is not None:
            candidates[folder] = files
    if not candidates:
        return []
    kept = set(named([path for files in candidates.values() for path in files]))
    removed = []
    for folder, files in candidates.items():
        if not kept.intersection(files):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.info("removed %d upload folder(s) no job names from %s", len(removed), uploads)
    return removed


def _quiet_since(folder: Path, cutoff: float) -> list[str] | None:
    """The paths of the folder's files when neither it nor any of them was modified since
    ``cutoff``; None when one was (or the folder is gone, or is not one)."""
    try:
        if not folder.is_dir() or folder.stat().st_mtime >= cutoff:
            return None
        files: list[str] = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                    return None
                files.append(os.path.join(folder, entry.name))
    except FileNotFoundError:
        return None
    return files
