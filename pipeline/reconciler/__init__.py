"""The reconciler: brings the broker back in line with PostgreSQL (:mod:`.sweeps`).

Above the store and beside submission, whose publishing policy it shares: beat runs a pass
every ``DOCLANE_RECONCILE_INTERVAL_S``, ``doclane reconcile`` runs one by hand.
"""

from __future__ import annotations

from pipeline.jobs.settings import ReconcileSettings
from pipeline.reconciler.sweeps import ReconcileReport, reconcile_once

__all__ = ["ReconcileReport", "ReconcileSettings", "reconcile_once"]
