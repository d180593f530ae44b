"""A pool process's runtime built from its settings: the one module that imports what a worker
converts with (the MCP client, the processor, the resilience layer, the sources).

Kept apart from :mod:`workers.runtime`, which every publisher imports through the Celery app:
importing this module is what a worker's parent does before it forks its pool
(:func:`workers.runtime.preload`), and what a pool process without that parent (``solo``, a
test) does when it builds its first runtime.
"""

from __future__ import annotations

from billiard.process import current_process
from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded

from pipeline.mcp.timeouts import CallTimeouts
from pipeline.processing.processor import JobProcessor
from pipeline.resilience.facade import build_resilient
from pipeline.sources.downloader import Downloader
from pipeline.store.store import JobStore
from workers.publisher import CeleryPublisher
from workers.resources import WorkerRuntime
from workers.settings import settings_of


def build_runtime(app: Celery) -> WorkerRuntime:
    """This process's store, MCP pool (its first origin by its index in the pool), sources
    and processor, from the app's settings tree. Connections open on first use."""
    tree = settings_of(app)
    source_settings = tree.sources
    mcp_settings = tree.mcp
    store = JobStore(tree.store)
    resilient = build_resilient(mcp_settings, tree.resilience, first_origin=_pool_index())
    downloader = Downloader(source_settings)
    publisher = CeleryPublisher(app)
    processor = JobProcessor(
        store=store.attempts,
        runner=resilient,
        settings=tree.processing,
        source_settings=source_settings,
        profile_settings=tree.profiles,
        downloader=downloader,
        deadline_exceptions=(SoftTimeLimitExceeded,),
        publisher=publisher,
        timeouts=CallTimeouts.from_settings(mcp_settings),
    )
    return WorkerRuntime(
        store=store,
        resilient=resilient,
        downloader=downloader,
        processor=processor,
        publisher=publisher,
        reconcile_settings=tree.reconcile,
        inbox_dir=source_settings.inbox_dir,
        settings=tree,
    )


def _pool_index() -> int:
    """This pool process's index in its worker (0, 1, ...; 0 outside a prefork pool)."""
    index = getattr(current_process(), "index", 0)
    return index if isinstance(index, int) else 0
