"""A pool process's resources: the store, the MCP pool, the processor and what closes them.

Kept apart from :mod:`workers.runtime` (this process's one runtime) so that
:mod:`workers.assembly`, which builds it, imports neither its importer nor anything heavy here."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.jobs.settings import ReconcileSettings
from pipeline.store.store import JobStore
from workers.publisher import CeleryPublisher

if TYPE_CHECKING:
    from pipeline.processing.processor import JobProcessor
    from pipeline.resilience.facade import Resilient
    from pipeline.settings.tree import Settings
    from pipeline.sources.downloader import Downloader
    from pipeline.webhooks.delivery import WebhookDispatcher

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
            from pipeline.sources.addresses import AddressPolicy
            from pipeline.store.outbox import WebhookOutbox
            from pipeline.webhooks.delivery import WebhookDispatcher

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
