"""The completion webhooks' outbox: the deliveries the database wrote when jobs became final.

The trigger of migration 0014 writes one delivery, in the transaction that makes a job with a
webhook final; this module is how senders take them and say how it went, and how operators see
and re-send them. It shares the process's :class:`~pipeline.store.pool.StorePool`, and every
write is one short statement (see ``sql/webhooks.sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from pipeline.store.pool import OnPool
from pipeline.store.queries import query


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery a sender holds: send it once, then report with its ``attempts``."""

    id: UUID
    job_id: UUID
    url: str
    event: dict[str, Any]
    attempts: int
    tries_since: datetime


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    """A delivery as ``doclane webhooks`` lists it (its URL as stored: mask it to show it)."""

    id: UUID
    job_id: UUID
    url: str
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime
    tries_since: datetime
    created_at: datetime
    delivered_at: datetime | None
    last_status: int | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class DeliveryCounts:
    """Pending (not tried yet, or being sent), failed (tried and failed, waiting to be retried),
    dead (gave up)."""

    pending: int = 0
    failed: int = 0
    dead: int = 0


class WebhookOutbox(OnPool):
    """The outbox of one database, through ``pool``."""

    def tell_finished(self, job_ids: Sequence[UUID], url: str) -> None:
        """Events for jobs that ended before this receiver asked (a deduplicated submission)."""
        if job_ids:
            params = {"job_ids": list(job_ids), "url": url}
            with self.pool.connection("writing webhook events") as conn:
                conn.execute(query("tell_finished"), params)

    def claim(self, *, claim_s: float) -> ClaimedDelivery | None:
        """One due delivery, held for ``claim_s`` seconds; ``None`` when none is due."""
        with self.pool.connection("claiming a webhook delivery") as conn:
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(query("claim_delivery"), {"claim_s": float(claim_s)}).fetchone()
        return ClaimedDelivery(**row) if row else None

    def delivered(self, delivery: ClaimedDelivery, *, status: int) -> bool:
        """The receiver took it; ``False`` when the claim had lapsed (another sender has it)."""
        params = {"id": delivery.id, "attempts": delivery.attempts, "status": status}
        with self.pool.connection("recording a webhook delivery") as conn:
            return conn.execute(query("mark_delivered"), params).rowcount == 1

    def failed(
        self,
        delivery: ClaimedDelivery,
        *,
        error: str,
        status: int | None,
        delay_s: float,
        give_up_s: float,
        dead: bool = False,
    ) -> DeliveryState | None:
        """A failed try: due again in ``delay_s``, or dead once past ``give_up_s`` of tries (or
        at once with ``dead``). ``None`` when the claim had lapsed."""
        params = {
            "id": delivery.id,
            "attempts": delivery.attempts,
            "status": status,
            "error": error,
            "delay_s": max(float(delay_s), 0.0),
            "give_up_s": float(give_up_s),
            "dead": dead,
        }
        with self.pool.connection("recording a failed webhook delivery") as conn:
            row = conn.execute(query("schedule_redelivery"), params).fetchone()
        return DeliveryState(row[0]) if row else None

    def counts(self) -> DeliveryCounts:
        with self.pool.connection("counting webhook deliveries") as conn:
            row = conn.execute(query("delivery_counts")).fetchone()
        return DeliveryCounts(*row) if row else DeliveryCounts()

    def listing(self, state: DeliveryState, *, limit: int = 50) -> list[DeliveryRow]:
        """Pending (with the failed ones) or dead deliveries, newest first."""
        params = {"state": state.value, "limit": limit}
        with self.pool.connection("listing webhook deliveries") as conn:
            rows = conn.cursor(row_factory=dict_row).execute(query("list_deliveries"), params)
            return [DeliveryRow(**{**row, "state": DeliveryState(row["state"])}) for row in rows]

    def revive(self, state: DeliveryState, ids: Sequence[UUID] | None = None) -> list[UUID]:
        """Dead (``DEAD``) or failed (``PENDING``) deliveries made due now, with a new run of
        tries before they give up; ``ids`` limits it to those."""
        params = {"state": state.value, "ids": list(ids) if ids is not None else None}
        with self.pool.connection("re-sending webhook deliveries") as conn:
            return [row[0] for row in conn.execute(query("revive_deliveries"), params)]
