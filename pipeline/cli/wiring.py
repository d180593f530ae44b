"""Where the CLI (the composition root) reaches ``workers/``: the Celery publisher and runners.

The one module of ``pipeline`` that imports ``workers`` (an import-linter contract in
pyproject.toml says so), each import inside the function that needs it: Celery and kombu take
a third of a second to load, which ``doclane stats``, ``jobs`` or ``db`` never pay
(tests/unit/test_lazy_imports.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipeline.queues import Publisher

from .settings import command_settings

if TYPE_CHECKING:  # pipeline.admin loads the MCP client and the breakers: not for submit
    from pipeline.admin.fleet import Fleet, QueueDepth
    from pipeline.resilience.settings import ResilienceSettings


@contextmanager
def celery_publisher() -> Iterator[Publisher]:
    """A publisher on the configured broker (``DOCLANE_BROKER_URL``), closed on exit."""
    from workers.app import create_app
    from workers.publisher import CeleryPublisher

    app = create_app(command_settings())
    try:
        yield CeleryPublisher(app)
    finally:
        app.close()


def run_worker(
    *,
    queues: Sequence[str] | None,
    concurrency: int | None,
    beat: bool | None,
    loglevel: str | None,
) -> int:
    from workers.main import run_worker as run_celery_worker

    return run_celery_worker(queues=queues, concurrency=concurrency, beat=beat, loglevel=loglevel)


def run_beat(*, loglevel: str | None) -> None:
    from workers.main import run_beat as run_celery_beat

    run_celery_beat(loglevel=loglevel)


@contextmanager
def broker_fleet() -> Iterator[Fleet]:
    """The broker's side of the admin views (queue depths), asked through kombu: no Celery app
    is built for it (``workers.fleet``)."""
    yield _broker_fleet()


def counted_fleet(resilience: ResilienceSettings) -> Fleet:
    """Queue depths as the live workers' heartbeats carry them, the broker asked only when none
    does (``pipeline.admin.fleet.CountedFleet``): kombu and the worker settings, a tenth of a second
    of a command's start, are loaded only then."""
    from pipeline.admin.fleet import CountedFleet

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
    from workers.fleet import BrokerFleet

    return BrokerFleet(command_settings().worker.broker_url)
