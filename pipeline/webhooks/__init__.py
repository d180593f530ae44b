"""Completion webhooks: one signed event per job that ends, delivered at least once.

::

    from pipeline.webhooks import WebhookDispatcher
    dispatcher = WebhookDispatcher(WebhookOutbox(store), read_settings().webhooks)
    dispatcher.deliver_due()      # one pass: what is due is sent, what fails is scheduled

The event is written by the database, in the transaction that makes the job final (migration
0014's trigger, into ``webhook_deliveries``); the workers send it (``delivery``), signed as
Standard Webhooks says (``sender``). ``doclane webhooks`` lists and re-sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.store.outbox import (
        ClaimedDelivery,
        DeliveryCounts,
        DeliveryRow,
        DeliveryState,
        WebhookOutbox,
    )
    from pipeline.webhooks.delivery import DeliveryReport, WebhookDispatcher, retry_delay
    from pipeline.webhooks.sender import Sent, WebhookSender, check_webhook_url, event_body
    from pipeline.webhooks.settings import WebhookSettings

__getattr__ = lazy.exports(
    __name__,
    {
        "ClaimedDelivery": "pipeline.store.outbox",
        "DeliveryCounts": "pipeline.store.outbox",
        "DeliveryRow": "pipeline.store.outbox",
        "DeliveryState": "pipeline.store.outbox",
        "WebhookOutbox": "pipeline.store.outbox",
        "DeliveryReport": ".delivery",
        "WebhookDispatcher": ".delivery",
        "retry_delay": ".delivery",
        "Sent": ".sender",
        "WebhookSender": ".sender",
        "check_webhook_url": ".sender",
        "event_body": ".sender",
        "WebhookSettings": ".settings",
    },
)

__all__ = [
    "ClaimedDelivery",
    "DeliveryCounts",
    "DeliveryReport",
    "DeliveryRow",
    "DeliveryState",
    "Sent",
    "WebhookDispatcher",
    "WebhookOutbox",
    "WebhookSender",
    "WebhookSettings",
    "check_webhook_url",
    "event_body",
    "retry_delay",
]
