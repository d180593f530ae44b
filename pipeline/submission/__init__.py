"""Submission: sources in, jobs committed, the queues they filled rung.

Above the store: a submission checks each source (``pipeline.sources``), makes its jobs in
the store a chunk at a time (:mod:`.intake`), splits long PDFs into slices (:mod:`.slicing`)
and rings the queues it filled (:func:`pipeline.queues.bells_for`); ``intake``: ``enqueue``,
``Submission``, ``Accepted``, and its settings are ``pipeline.jobs.settings.SubmitSettings``.
This ``__init__`` imports nothing (docs/architecture.md): importers name the module.
"""
