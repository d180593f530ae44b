"""Repaying the messages owed to the queues, after a capped tenant's job ends.

A message is a claim right on its queue; one whose claim found only jobs of tenants paused or
at their running cap was acknowledged and owed to the queue (:mod:`pipeline.store.debts`). The
end of a capped tenant's job (success, failure, retry, release, a cancel noticed) may give the
tenant room, so the worker repays what it can at once: one round trip, only after the jobs of
tenants with a cap, which the process learns from the database at most every
``CAPS_FRESH_S`` (a cap set since is covered by the reconciler's pass, which repays too).
"""

from __future__ import annotations

import logging
import time

from errors import DatabaseUnavailable
from pipeline.processing.runner import Claim
from pipeline.queues import Publisher
from pipeline.store import Attempts
from pipeline.store.debts import pay

log = logging.getLogger("doclane.processor")

#: How long a process trusts what it read of the tenants' caps.
CAPS_FRESH_S = 5.0


class OwedMessages:
    """A worker process's repayment of owed messages (see the module docstring)."""

    def __init__(self, store: Attempts, publisher: Publisher | None) -> None:
        self.store = store
        self.publisher = publisher
        self._capped: frozenset[str] = frozenset()
        self._read_at = float("-inf")

    def after(self, claim: Claim) -> int:
        """After the jobs of ``claim`` ended: repay what is owed when one was a capped
        tenant's. Never raises: the reconciler's pass is the backstop."""
        if self.publisher is None or claim.job is None:
            return 0
        tenants = {claim.job.tenant, *(job.tenant for job in claim.companions)}
        try:
            if tenants.isdisjoint(self._caps()):
                return 0
            return pay(self.store.take_owed, self.publisher)
        except DatabaseUnavailable as exc:
            log.warning("owed messages left to the reconciler: %s", exc)
            return 0

    def _caps(self) -> frozenset[str]:
        now = time.monotonic()
        if now - self._read_at >= CAPS_FRESH_S:
            self._capped = self.store.capped_tenants()
            self._read_at = now
        return self._capped
