"""doclane's settings: one tree (:class:`Settings`) of one section per component, read from the
environment and ``.env`` once per process by :func:`read_settings`.

::

    from pipeline.settings import read_settings
    settings = read_settings()          # in a composition root: the CLI, the worker, the API
    store = JobStore(settings.store)    # every part is handed its section

A section is a pydantic model (:class:`pipeline.support.settings.Section`) kept beside its
component; the API's and the workers' sections are here, since those components are the
processes that read the tree. docs/configuration.md lists every variable, section by section.
"""

from __future__ import annotations

from pipeline.settings.api import ApiSettings
from pipeline.settings.tree import Settings, read_settings
from pipeline.settings.workers import WorkerSettings

__all__ = ["ApiSettings", "Settings", "WorkerSettings", "read_settings"]
