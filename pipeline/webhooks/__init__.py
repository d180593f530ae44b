"""Completion webhooks: one signed event per job that ends, delivered at least once.

::

    from pipeline.webhooks import WebhookDispatcher
    dispatcher = WebhookDispatcher(WebhookOutbox(store.pool), read_settings().webhooks)
    dispatcher.deliver_due()      # one pass: what is due is sent, what fails is scheduled

The event is written by the database, in the transaction that makes the job final (migration
0014's trigger, into ``webhook_deliveries``); the workers send it (``delivery``), signed as
Standard Webhooks says (``sender``). ``doclane webhooks`` lists and re-sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.store.outbox import ClaimedDelivery as ClaimedDelivery
    from pipeline.store.outbox import DeliveryCounts as DeliveryCounts
    from pipeline.store.outbox import DeliveryRow as DeliveryRow
    from pipeline.store.outbox import DeliveryState as DeliveryState
    from pipeline.store.outbox import WebhookOutbox as WebhookOutbox
    from pipeline.webhooks.delivery import DeliveryReport as DeliveryReport
    from pipeline.webhooks.delivery import WebhookDispatcher as WebhookDispatcher
    from pipeline.webhooks.delivery import retry_delay as retry_delay
    from pipeline.webhooks.sender import Sent as Sent
    from pipeline.webhooks.sender import WebhookSender as WebhookSender
    from pipeline.webhooks.sender import check_webhook_url as check_webhook_url
    from pipeline.webhooks.sender import event_body as event_body
    from pipeline.webhooks.settings import WebhookSettings as WebhookSettings

if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
