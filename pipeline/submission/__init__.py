"""Submission: sources in, jobs committed, the queues they filled rung.

Above the store: a submission checks each source (``pipeline.sources``), makes its jobs in
the store a chunk at a time (:mod:`.intake`), splits long PDFs into slices (:mod:`.slicing`)
and rings the queues it filled (:func:`pipeline.queues.bells_for`).
"""

from __future__ import annotations

from pipeline.jobs.settings import SubmitSettings
from pipeline.submission.intake import Accepted, Submission, enqueue

__all__ = ["Accepted", "Submission", "SubmitSettings", "enqueue"]
