"""Fixtures of the webhook tests: an outbox on the test's database, and a dispatcher whose
retry schedule is tiny (tests never wait for a real backoff) and that may reach loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pipeline.settings.tree import read_settings
from pipeline.sources.addresses import AddressPolicy
from pipeline.store.outbox import WebhookOutbox
from pipeline.store.store import JobStore
from pipeline.webhooks.delivery import WebhookDispatcher
from tests.fixtures.webhook_receiver import WebhookReceiver

#: A schedule of milliseconds: a receiver that refuses a few times is retried at once.
TINY_SCHEDULE: dict[str, Any] = {
    "webhook_retry_base_s": 0.01,
    "webhook_retry_max_s": 0.05,
    "webhook_timeout_s": 5.0,
    "webhook_claim_s": 30.0,
}


@pytest.fixture
def outbox(store: JobStore) -> WebhookOutbox:
    return WebhookOutbox(store.pool)


@pytest.fixture
def make_dispatcher(
    outbox: WebhookOutbox, webhook_receiver: WebhookReceiver
) -> Iterator[Callable[..., WebhookDispatcher]]:
    made: list[WebhookDispatcher] = []

    def make(*, allow_private: bool = True, **overrides: Any) -> WebhookDispatcher:
        values = {**TINY_SCHEDULE, "webhook_secret": webhook_receiver.secret, **overrides}
        dispatcher = WebhookDispatcher(
            outbox,
            read_settings(webhooks=values).webhooks,
            policy=AddressPolicy(allow_private=allow_private),
        )
        made.append(dispatcher)
        return dispatcher

    yield make
    for dispatcher in made:
        dispatcher.close()
