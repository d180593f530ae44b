"""A delivery pass: send the due events of the outbox, each once, and schedule what failed.

Beat sends the workers a pass every ``DOCLANE_WEBHOOK_POLL_S`` on the control queue; ``doclane
webhooks --retry`` makes dead or failed deliveries due again for the next one. A pass takes one
due delivery at a time (SKIP LOCKED, its due time moved past the claim), sends it, and records
the outcome fenced by the claim's attempt:

- a 2xx answer: delivered;
- anything else (another status, a refused connection, a timeout): due again after an
  exponential, jittered wait (``DOCLANE_WEBHOOK_RETRY_BASE_S`` doubling up to
  ``DOCLANE_WEBHOOK_RETRY_MAX_S``), or dead once its tries have run for
  ``DOCLANE_WEBHOOK_GIVE_UP_S`` (a day by default); a refused address is dead at once;
- the sender dies mid-send: its claim lapses after ``DOCLANE_WEBHOOK_CLAIM_S`` and the next pass
  sends it again. The receiver may then get the event twice, with the same ``webhook-id``:
  delivery is at least once, and the id is what makes it once for the receiver.

Without ``DOCLANE_WEBHOOK_SECRET`` nothing is sent unsigned: a pass sends nothing and says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pipeline.sources.addresses import AddressPolicy
from pipeline.sources.settings import SourceSettings
from pipeline.store.outbox import ClaimedDelivery, DeliveryState, WebhookOutbox
from pipeline.support.secrets import Masker, process_masker
from pipeline.support.waits import Backoff, half_jitter
from pipeline.webhooks.sender import WebhookSender
from pipeline.webhooks.settings import WebhookSettings

log = logging.getLogger("doclane.webhooks")


def retry_delay(settings: WebhookSettings, attempts: int) -> float:
    """The wait after the ``attempts``-th failed try: doubling from the base, capped, then
    between half and all of that (receivers that come back are not met by every sender at
    once)."""
    waits = Backoff(settings.webhook_retry_base_s, settings.webhook_retry_max_s, half_jitter)
    return waits.wait(attempts)


@dataclass(slots=True)
class DeliveryReport:
    delivered: list[UUID] = field(default_factory=list)
    failed: list[UUID] = field(default_factory=list)
    dead: list[UUID] = field(default_factory=list)
    #: Why nothing was sent, when nothing could be (no secret set).
    idle_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivered": [str(i) for i in self.delivered],
            "failed": [str(i) for i in self.failed],
            "dead": [str(i) for i in self.dead],
            "idle_reason": self.idle_reason,
        }


class WebhookDispatcher:
    """Runs delivery passes for one process: the outbox, the settings, one sender."""

    def __init__(
        self,
        outbox: WebhookOutbox,
        settings: WebhookSettings | None = None,
        *,
        policy: AddressPolicy | None = None,
        masker: Masker | None = None,
    ) -> None:
        self.outbox = outbox
        self.settings = settings or WebhookSettings.from_environment()
        self.policy = policy or AddressPolicy(
            allow_private=SourceSettings.from_environment().allow_private_urls
        )
        self.masker = masker or process_masker()
        self._sender: WebhookSender | None = None
        self._warned = False

    def close(self) -> None:
        if self._sender is not None:
            self._sender.close()

    def _ready_sender(self) -> WebhookSender | None:
        secret = self.settings.webhook_secret
        if self._sender is None and secret is not None:
            self._sender = WebhookSender(
                secret.get_secret_value(),
                self.policy,
                timeout_s=self.settings.webhook_timeout_s,
                public_api_url=self.settings.public_api_url,
            )
        return self._sender

    def deliver_due(self) -> DeliveryReport:
        """Send every due delivery, up to ``DOCLANE_WEBHOOK_BATCH`` of them."""
        report = DeliveryReport()
        sender = self._ready_sender()
        if sender is None:
            report.idle_reason = "DOCLANE_WEBHOOK_SECRET is not set: no event is sent unsigned"
            if not self._warned and self.outbox.counts().pending:
                self._warned = True  # once a process: a pass runs every few seconds
                log.warning("webhook deliveries wait: %s", report.idle_reason)
            return report
        for _ in range(self.settings.webhook_batch):
            delivery = self.outbox.claim(claim_s=self.settings.webhook_claim_s)
            if delivery is None:
                break
            self._send_one(sender, delivery, report)
        return report

    def _send_one(
        self, sender: WebhookSender, delivery: ClaimedDelivery, report: DeliveryReport
    ) -> None:
        sent = sender.send(str(delivery.id), delivery.url, delivery.event)
        shown_url = self.masker.text(delivery.url)
        if sent.ok:
            self.outbox.delivered(delivery, status=sent.status or 200)
            report.delivered.append(delivery.id)
            log.info(
                "webhook %s of job %s delivered to %s", delivery.id, delivery.job_id, shown_url
            )
            return
        error = self.masker.text(sent.error or "failed")
        state = self.outbox.failed(
            delivery,
            error=error,
            status=sent.status,
            delay_s=retry_delay(self.settings, delivery.attempts),
            give_up_s=self.settings.webhook_give_up_s,
            dead=sent.final,
        )
        if state is DeliveryState.DEAD:
            report.dead.append(delivery.id)
            log.error(
                "webhook %s of job %s is dead (%s): %s",
                delivery.id,
                delivery.job_id,
                shown_url,
                error,
            )
        else:
            report.failed.append(delivery.id)
            log.warning(
                "webhook %s of job %s: try %d failed (%s): %s",
                delivery.id,
                delivery.job_id,
                delivery.attempts,
                shown_url,
                error,
            )
