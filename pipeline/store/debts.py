"""Messages owed to the queues (migration 0020): a claim that found only capped work.

A broker message is a claim right on its queue. One whose claim finds queued jobs only of
tenants paused or at their running cap takes nothing and is acknowledged: keeping it would
only loop it through the broker while the tenants wait. Its queue is owed a message instead
(``queue_debts``), in the claim's own transaction, and the debt is repaid, a message published
naming a queued job of a tenant with room, when room may have freed: a worker after a capped
tenant's job ends, the reconciler on every pass, and an operator's change of a tenant.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pipeline.queues import JobMessage, Publisher
from pipeline.store.pool import StorePool
from pipeline.store.queries import query

log = logging.getLogger("doclane.store")

#: The most owed messages one repay publishes (the rest at the next end, or the next pass).
REPAY_AT_ONCE = 100


def take_owed(pool: StorePool, limit: int) -> list[JobMessage]:
    """Up to ``limit`` owed messages that may be published now, each queue's debt lowered by
    as many when this returns: the caller publishes them (one that fails to publish is a lost
    message, which the lost-message sweep finds)."""
    with pool.connection("taking owed messages") as conn:
        rows = conn.execute(query("take_owed"), {"limit": limit}).fetchall()
    return [JobMessage(row[0], row[1], priority=row[2]) for row in rows]


def owed_by_queue(pool: StorePool) -> dict[str, int]:
    """The messages each queue is owed (the queues owed none left out)."""
    rows = pool.fetch_rows("reading owed messages", query("owed_by_queue"), {})
    return {row["queue"]: int(row["owed"]) for row in rows}


def pay(take: Callable[[int], list[JobMessage]], publisher: Publisher) -> int:
    """Take the owed messages that may be published now and publish them: how many were. A
    publish that fails leaves a queued job without its message, which the lost-message sweep
    finds."""
    sent = 0
    for message in take(REPAY_AT_ONCE):
        try:
            publisher.publish(message)
        except Exception as exc:
            log.warning("could not publish an owed message for %s: %s", message.job_id, exc)
        else:
            sent += 1
    if sent:
        log.info("%d owed message(s) published: tenants had room again", sent)
    return sent
