"""What the API's handlers and the console's pages share, in a module of its own.

The console is mounted by the API and needs the same context; with the context defined beside
the API's routes (``pipeline.api.app``), the two packages imported each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.admin import AdminSettings, Fleet
from pipeline.queues import Publisher
from pipeline.resilience import ResilienceSettings
from pipeline.settings.api import ApiSettings
from pipeline.sources import SourceSettings
from pipeline.store import JobStore


@dataclass
class ApiContext:
    """What the handlers share: one store, one publisher, one fleet per API process."""

    settings: ApiSettings
    admin: AdminSettings
    resilience: ResilienceSettings
    sources: SourceSettings
    store: JobStore
    publisher: Publisher
    fleet: Fleet | None
