"""Jobs as values, the ground floor every part may stand on: what a submitter asks for and
what the store keeps (:mod:`.model`), a job's output formats (:mod:`.formats`) and
conversion options (:mod:`.options`), a submission as asked (:mod:`.request`) and tenants
(:mod:`.tenants`). This ``__init__`` imports nothing (docs/architecture.md): importers
name the module (``from pipeline.jobs.model import JobState``).

Nothing here imports another part of doclane but the queues and the errors: submitting
(``pipeline.submission``) and reconciling (``pipeline.reconciler``) stand above the store,
which stands on these values.
"""
