"""The live workers, as the API shows them: asked in the background, read from memory.

Celery's inspect waits its whole timeout for replies (it cannot know how many workers exist),
too long for ``GET /v1/stats`` or a scrape. A thread asks every ``DOCLANE_API_WORKERS_REFRESH_S``
and requests read its latest answer; when the latest ask failed, reading raises that failure, so
the answer says "workers unreachable" rather than showing a stale list as current.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pipeline.admin import WorkerInfo

log = logging.getLogger("doclane.api")


class WorkersNotAskedYet(RuntimeError):
    """The first inspect has not answered yet."""


class WorkersCache:
    def __init__(self, ask: Callable[[], list[WorkerInfo]] | None, refresh_s: float) -> None:
        self._ask = ask
        self._refresh_s = refresh_s
        self._latest: list[WorkerInfo] | BaseException = WorkersNotAskedYet(
            "the API has not heard from the workers yet"
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def get(self) -> list[WorkerInfo]:
        latest = self._latest
        if isinstance(latest, BaseException):
            raise latest
        return latest

    def refresh(self) -> None:
        if self._ask is None:
            return
        try:
            self._latest = self._ask()
        except Exception as exc:
            self._latest = exc
            log.warning("could not ask the workers: %s", exc)

    def start(self) -> None:
        if self._ask is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="doclane-workers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self._refresh_s)
