"""``doclane submit --wait``: following a submission's jobs to their end, and saying why when
it stops waiting first.

Progress goes to stderr, so ``--json`` stays clean on stdout: a bar where stderr is a terminal;
elsewhere (a log, a pipe) a bar's frames would be noise, so one plain line each time more jobs
have finished, or nothing with ``--json``. Giving up (``--timeout``) says how many jobs were
not finished, in which states, and whether any worker is alive to run them: the workers'
heartbeats (``pipeline.admin.heartbeats``), read only then.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from uuid import UUID

import typer

from pipeline.jobs.model import Job, JobState
from pipeline.resilience.settings import ResilienceSettings
from pipeline.store.store import JobStore

#: Seconds between the polls of the database while waiting (the progress shown, not a sync).
POLL_S = 0.5


@dataclass(frozen=True)
class GaveUp:
    """Why ``--wait`` stopped before every job finished."""

    after_s: float
    #: The jobs not finished, by state.
    unfinished: dict[str, int]
    #: Worker nodes alive by their heartbeats; None when that could not be told.
    workers: list[str] | None
    #: Why the workers could not be told, or what their number means.
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "gave_up_after_s": self.after_s,
            "unfinished": self.unfinished,
            "workers_alive": None if self.workers is None else len(self.workers),
            "workers": self.workers,
            "note": self.note,
        }

    def lines(self) -> list[str]:
        states = ", ".join(f"{n} {state}" for state, n in sorted(self.unfinished.items()))
        count = sum(self.unfinished.values())
        return [
            f"gave up waiting after {self.after_s:g} s (--timeout): {count} job(s) not "
            f"finished ({states})",
            self.note,
        ]


@dataclass(frozen=True)
class Waited:
    jobs: list[Job]
    gave_up: GaveUp | None


class _Progress:
    """A bar on a terminal, a line per change elsewhere, or nothing."""

    def __init__(self, total: int, *, stream: TextIO, quiet: bool) -> None:
        self.total, self.stream, self.done, self.failed = total, stream, 0, 0
        self.bar: Any = None
        self.lines = not quiet and not stream.isatty()
        if stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="job", desc="converting", file=stream)

    def update(self, done: int, failed: int) -> None:
        if (done, failed) == (self.done, self.failed):
            return
        self.done, self.failed = done, failed
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            self.bar.set_postfix(failed=failed, refresh=True)
        elif self.lines:
            print(
                f"finished {done} of {self.total} job(s), {failed} not succeeded", file=self.stream
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def wait_for(
    store: JobStore,
    job_ids: Sequence[UUID],
    timeout: float | None,
    *,
    resilience: ResilienceSettings,
    quiet: bool,
) -> Waited:
    """Poll until every job has finished (or ``timeout``), then read them whole once.

    Each poll asks only which of the jobs still waited for have finished (ids, not rows): with
    a thousand jobs, reading and validating every row twice a second took a core's worth of
    time from the workers on a small machine.
    """
    ids = list(dict.fromkeys(job_ids))
    waiting = set(ids)
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    progress = _Progress(len(ids), stream=sys.stderr, quiet=quiet)
    try:
        failed = 0
        while waiting:
            finished = store.reads.finished_among(waiting)
            waiting -= finished.keys()
            failed += sum(1 for state in finished.values() if state is not JobState.SUCCEEDED)
            progress.update(len(ids) - len(waiting), failed)
            if not waiting or (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(POLL_S)  # polling the database for the progress shown
    finally:
        progress.close()
    jobs = store.reads.get_jobs(ids)
    if not waiting:
        return Waited(jobs, None)
    return Waited(jobs, _gave_up(jobs, waiting, timeout or 0.0, resilience))


def _gave_up(
    jobs: list[Job], waiting: set[UUID], after_s: float, resilience: ResilienceSettings
) -> GaveUp:
    unfinished = dict(
        Counter(j.state.value for j in jobs if j.id in waiting and not j.state.terminal)
    )
    # The admin views load Redis's client: only a wait that gives up asks who is alive.
    from pipeline.admin.fleet import read_live_workers
    from pipeline.resilience.storage import RedisUnavailable

    try:
        workers = [w.name for w in read_live_workers(resilience)]
    except RedisUnavailable as exc:
        return GaveUp(after_s, unfinished, None, f"whether any worker is alive is unknown: {exc}")
    if not workers:
        note = (
            "no worker is alive (no heartbeat in Redis): start one (doclane worker); the jobs "
            "wait, queued, until one runs them"
        )
    else:
        note = (
            f"{len(workers)} worker(s) alive ({', '.join(workers)}): the jobs wait behind others "
            "or are still converting (doclane stats shows the queues, doclane status JOB a job)"
        )
    return GaveUp(after_s, unfinished, workers, note)


def say_gave_up(gave_up: GaveUp) -> None:
    for line in gave_up.lines():
        typer.echo(line, err=True)
