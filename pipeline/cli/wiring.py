"""Where the CLI (the composition root) reaches ``workers/``: the Celery publisher and runners.

``pipeline`` never imports Celery; these few functions load ``workers`` by name at run time,
so the library stays Celery-free and type-checks without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from pipeline.queues import Publisher

from .settings import command_settings

if TYPE_CHECKING:  # pipeline.admin loads the MCP client and the breakers: not for submit
    from pipeline.admin import Fleet, QueueDepth
    from pipeline.resilience import ResilienceSettings


@contextmanager
def celery_publisher() -> Iterator[Publisher]:
    """A publisher on the configured broker (``DOCLANE_BROKER_URL``), closed on exit."""
    app_module = importlib.import_module("workers.app")
    publisher_module = importlib.import_module("workers.publisher")
    app: Any = app_module.create_app(command_settings())
    try:
        yield cast(Publisher, publisher_module.CeleryPublisher(app))
    finally:
        app.close()


def run_worker(
    *,
    queues: Sequence[str] | None,
    concurrency: int | None,
    beat: bool | None,
    loglevel: str | None,
) -> int:
    main = importlib.import_module("workers.main")
    return int(
        main.run_worker(queues=queues, concurrency=concurrency, beat=beat, loglevel=loglevel)
    )


def run_beat(*, loglevel: str | None) -> None:
    main = importlib.import_module("workers.main")
    main.run_beat(loglevel=loglevel)


@contextmanager
def broker_fleet() -> Iterator[Fleet]:
    """The broker's side of the admin views (queue depths), asked through kombu: no Celery app
    is built for it (``workers.fleet``)."""
    yield _broker_fleet()


def counted_fleet(resilience: ResilienceSettings) -> Fleet:
    """Queue depths as the live workers' heartbeats carry them, the broker asked only when none
    does (``pipeline.admin.CountedFleet``): kombu and the worker settings, a tenth of a second
    of a command's start, are loaded only then."""
    from pipeline.admin import CountedFleet

    return CountedFleet(resilience, _BrokerWhenAsked())


class _BrokerWhenAsked:
    """The broker's side, built at its first question."""

    def __init__(self) -> None:
        self._fleet: Fleet | None = None

    def queue_depths(self) -> list[QueueDepth]:
        if self._fleet is None:
            self._fleet = _broker_fleet()
        return self._fleet.queue_depths()


def _broker_fleet() -> Fleet:
    fleet_module = importlib.import_module("workers.fleet")
    return cast("Fleet", fleet_module.BrokerFleet(command_settings().worker.broker_url))
