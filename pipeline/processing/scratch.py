"""Sweeping the inbox of what killed workers left behind.

A worker that downloads a URL works in a folder of its own attempt, ``inbox/job-<id>-<attempt>/``,
and a batch of small documents goes to the server as ``inbox/batch-<lead id>-<attempt>/``; both
are removed when the attempt ends, however it ends, except when the worker is killed (``kill -9``,
OOM, a lost host): then the folder and any ``.part`` file in it stay forever. The reconciler
asks the database which of those attempts are still running and removes the folders of the
others. A folder younger than ``min_age_s`` is left alone even so: its attempt may have been
claimed a moment ago, between the listing and the query.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from uuid import UUID

from pipeline.sources.downloader import remove_stale_partials

log = logging.getLogger("doclane.reconcile")

_SCRATCH = re.compile(
    r"^(?:job|batch)-(?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-(?P<attempt>\d+)$"
)

RunningAttempts = Callable[[list[UUID]], Iterable[tuple[UUID, int]]]


def sweep_scratch(inbox_dir: Path, running: RunningAttempts, *, min_age_s: float) -> list[Path]:
    """Remove attempt folders whose attempt no longer runs, and stray ``.part`` files."""
    if not inbox_dir.is_dir():
        return []
    cutoff = time.time() - min_age_s
    candidates: dict[tuple[UUID, int], Path] = {}
    for path in inbox_dir.iterdir():
        match = _SCRATCH.match(path.name)
        if match is None or not path.is_dir():
            continue
        try:
            if path.stat().st_mtime >= cutoff:
                continue
        except FileNotFoundError:
            continue
        candidates[(UUID(match["id"]), int(match["attempt"]))] = path
    removed: list[Path] = []
    if candidates:
        alive = set(running(sorted({job_id for job_id, _ in candidates})))
        for key, path in candidates.items():
            if key not in alive:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    removed.extend(remove_stale_partials(inbox_dir, older_than_s=min_age_s))
    if removed:
        log.info("removed %d folder(s) and file(s) that killed workers left in %s",
                 len(removed), inbox_dir)  # fmt: skip
    return removed
