"""Completion webhooks: one signed event per job that ends, delivered at least once.

::

    from pipeline.store.outbox import WebhookOutbox
    from pipeline.webhooks.delivery import WebhookDispatcher
    dispatcher = WebhookDispatcher(WebhookOutbox(store.pool), read_settings().webhooks)
    dispatcher.deliver_due()      # one pass: what is due is sent, what fails is scheduled

The event is written by the database, in the transaction that makes the job final (migration
0014's trigger, into ``webhook_deliveries``); the workers send it (``delivery``), signed as
Standard Webhooks says (``sender``: ``WebhookSender``, ``event_body``, ``check_webhook_url``).
``doclane webhooks`` lists and re-sends. This ``__init__`` imports nothing
(docs/architecture.md): importers name the module (``settings``: ``WebhookSettings``).
"""
