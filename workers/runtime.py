"""Per-process resources of a worker: one store, one MCP pool, one processor.

Connections must not cross a fork, so nothing here is built at import time or in the parent:
Celery's ``worker_process_init`` builds them in each pool process, ``worker_process_shutdown``
closes them (the MCP client DELETEs its session, or stops its stdio child). A pool without
those signals (``solo``, threads) builds them on first use instead.

The Celery app imports this module, and so does every process that only publishes
(``doclane submit``, the API): what a runtime is made of (the MCP client, the store, the
processor, the resilience layer) is imported when a runtime is built (:mod:`workers.assembly`),
not before, which takes 0.15 s off every submission's start. A worker's parent imports it before
it forks its pool (:func:`preload`), so that each pool process finds it imported rather than
spending about 0.4 s of CPU on it after the fork.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from celery import Celery

from pipeline.jobs.settings import ReconcileSettings
from pipeline.store import JobStore
from pipeline.support import tracing
from workers.publisher import CeleryPublisher

if TYPE_CHECKING:
    from pipeline.processing import JobProcessor
    from pipeline.resilience import Resilient
    from pipeline.settings import Settings
    from pipeline.sources import Downloader
    from pipeline.webhooks import WebhookDispatcher

log = logging.getLogger("doclane.worker")


@dataclass
class WorkerRuntime:
    store: JobStore
    resilient: Resilient
    downloader: Downloader
    processor: JobProcessor
    publisher: CeleryPublisher
    reconcile_settings: ReconcileSettings
    #: Swept by the reconciler of what killed attempts left behind.
    inbox_dir: Path
    #: The process's settings tree, for the parts made later (the webhooks' sender).
    settings: Settings
    _webhooks: WebhookDispatcher | None = None

    def webhooks(self) -> WebhookDispatcher:
        """The completion webhooks' sender, made by the first delivery pass of the process."""
        if self._webhooks is None:
            from pipeline.sources import AddressPolicy
            from pipeline.webhooks import WebhookDispatcher, WebhookOutbox

            policy = AddressPolicy(allow_private=self.settings.sources.allow_private_urls)
            outbox = WebhookOutbox(self.store.pool)
            self._webhooks = WebhookDispatcher(outbox, self.settings.webhooks, policy=policy)
        return self._webhooks

    def close(self) -> None:
        closers = [self.processor.close, self.resilient.close, self.downloader.close,
                   self.store.close]  # fmt: skip
        if self._webhooks is not None:
            closers.insert(0, self._webhooks.close)
        for closer in closers:
            try:
                closer()
            except Exception:  # shutting down: report, and close the rest
                log.exception("error while closing worker resources")


def preload() -> None:
    """Import what a runtime is built from (:mod:`workers.assembly`), in a worker's parent
    before it forks its pool. Only code: nothing is connected or started at import, so nothing
    but modules crosses the fork. Each pool process then starts converting sooner (one made
    later by ``DOCLANE_MAX_TASKS_PER_CHILD`` too) and the modules' pages are shared."""
    importlib.import_module("workers.assembly")


class _ProcessState:
    """This process's app and runtime (module state, guarded by a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.app: Celery | None = None
        self.runtime: WorkerRuntime | None = None


_state = _ProcessState()


def bind_app(app: Celery) -> None:
    """The app whose publisher the reconciler uses in this process (set by ``create_app``)."""
    _state.app = app


def start_runtime(*, warm: bool = False) -> WorkerRuntime:
    """Build this process's resources once; ``warm`` also opens the MCP sessions now."""
    with _state.lock:
        if _state.runtime is None:
            if _state.app is None:
                raise RuntimeError("no doclane Celery app was created in this process")
            tracing.configure("doclane-worker")  # after the fork: one exporter per process
            from workers.assembly import build_runtime

            rt = build_runtime(_state.app)
            _state.runtime = rt
            log.info(
                "worker process ready: servers %s, worker id %s",
                ", ".join(rt.resilient.pool.endpoints),
                rt.processor.worker_id,
            )
            if warm:
                _warm_up(rt)
        return _state.runtime


def _warm_up(rt: WorkerRuntime) -> None:
    """Initialize one session per server at process start; a server that is down is not an
    error here (the first job meets it through retry and the breaker). A stdio child is not
    warmed: it starts lazily, so a process that never converts never runs a server."""
    from pipeline.mcp import is_stdio

    for endpoint in rt.resilient.pool.endpoints:
        if is_stdio(endpoint):
            continue
        try:
            rt.resilient.pool.ready_client(endpoint)
        except Exception as exc:
            log.warning("server %s not ready at start: %s", endpoint, exc)


def current_runtime() -> WorkerRuntime:
    rt = _state.runtime
    return rt if rt is not None else start_runtime()


def stop_runtime() -> None:
    with _state.lock:
        rt, _state.runtime = _state.runtime, None
    if rt is not None:
        rt.close()
    tracing.shutdown()  # a pool process ends with os._exit: no exit hook exports the rest
