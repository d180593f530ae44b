"""The reconciler: requeues what dead workers held and rings where work waits (:mod:`.sweeps`).

Above the store: beat runs a pass every ``DOCLANE_RECONCILE_INTERVAL_S``, ``doclane reconcile``
runs one by hand (:func:`.sweeps.reconcile_once`; its settings are
``pipeline.jobs.settings.ReconcileSettings``). This ``__init__`` imports nothing
(docs/architecture.md): importers name the module.
"""
