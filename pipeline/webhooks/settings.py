"""Settings of completion webhooks: the default receiver, the signing secret, the retry schedule."""

from __future__ import annotations

from pydantic import Field, SecretStr, model_validator

from pipeline.support.settings import Section


class WebhookSettings(Section):
    """One per process: submitters read the default URL, senders the rest."""

    #: The completion webhook of jobs submitted without one (empty: none).
    webhook_url: str | None = None
    #: The signing secret, a Standard Webhooks ``whsec_<base64>`` value shared with receivers.
    #: Without it nothing is sent: deliveries wait (counted as failed) until it is set.
    webhook_secret: SecretStr | None = None
    #: The first wait after a failed try; each next one doubles, up to the maximum, jittered.
    webhook_retry_base_s: float = Field(default=5.0, gt=0)
    #: The longest wait between two tries.
    webhook_retry_max_s: float = Field(default=3600.0, gt=0)
    #: A delivery that has failed for this long is dead (``doclane webhooks --dead --retry``).
    webhook_give_up_s: float = Field(default=86400.0, gt=0)
    #: The deadline of each connect, send and read of a try: past it, the try failed.
    webhook_timeout_s: float = Field(default=10.0, gt=0)
    #: How long a sender holds the delivery it is sending; past it another may send it again.
    webhook_claim_s: float = Field(default=60.0, gt=0)
    #: How often beat sends the workers a delivery pass (the longest an event waits).
    webhook_poll_s: float = Field(default=5.0, gt=0)
    #: Deliveries sent by one pass at most; the rest wait for the next.
    webhook_batch: int = Field(default=100, ge=1)
    #: The API's address as receivers reach it (``https://doclane.example.org``): an event's
    #: results are URLs under it. Empty: they are paths of the API.
    public_api_url: str | None = None

    @model_validator(mode="after")
    def _claim_outlasts_request(self) -> WebhookSettings:
        if self.webhook_claim_s <= self.webhook_timeout_s:
            raise ValueError(
                "DOCLANE_WEBHOOK_CLAIM_S must be longer than DOCLANE_WEBHOOK_TIMEOUT_S: a claim "
                "that lapses mid-request lets another sender send the same try"
            )
        return self
