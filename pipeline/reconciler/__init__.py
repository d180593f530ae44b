"""The reconciler: requeues what dead workers held and rings where work waits (:mod:`.sweeps`).

Above the store: beat runs a pass
every ``DOCLANE_RECONCILE_INTERVAL_S``, ``doclane reconcile`` runs one by hand.
"""

from __future__ import annotations

from pipeline.jobs.settings import ReconcileSettings
from pipeline.reconciler.sweeps import ReconcileReport, reconcile_once

__all__ = ["ReconcileReport", "ReconcileSettings", "reconcile_once"]
