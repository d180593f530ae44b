"""Owed messages repaid from outside a worker: the reconciler's pass, an operator's change.

The worker repays after a capped tenant's job ends (:mod:`pipeline.processing.owed`); kills,
cancels, lease expiries and a raised or lifted cap free room without such an end, so the
reconciler repays on every pass, and ``doclane tenants set`` calls :func:`repay_owed` after it
changed a tenant.
"""

from __future__ import annotations

from pipeline.queues import Publisher
from pipeline.store.debts import pay
from pipeline.store.operations import Operations


def repay_owed(operations: Operations, publisher: Publisher) -> int:
    """Publish the owed messages that tenants' room lets be claimed now: how many were."""
    return pay(operations.take_owed, publisher)
