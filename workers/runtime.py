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

import threading

from celery import Celery

from pipeline.support import tracing
from workers.resources import WorkerRuntime, log


def preload() -> None:
    """Import what a runtime is built from (:mod:`workers.assembly`), in a worker's parent
    before it forks its pool. Only code: nothing is connected or started at import, so nothing
    but modules crosses the fork. Each pool process then starts converting sooner (one made
    later by ``DOCLANE_MAX_TASKS_PER_CHILD`` too) and the modules' pages are shared."""
    from workers import assembly  # noqa: F401  (importing it is the point)


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
    from pipeline.mcp.endpoints import is_stdio

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
