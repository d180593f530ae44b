"""doclane's settings: one tree (:class:`.tree.Settings`) of one section per component, read from
the environment and ``.env`` once per process by :func:`.tree.read_settings`.

::

    from pipeline.settings.tree import read_settings
    settings = read_settings()          # in a composition root: the CLI, the worker, the API
    store = JobStore(settings.store)    # every part is handed its section

A section is a pydantic model (:class:`pipeline.support.settings.Section`) kept beside its
component; the API's and the workers' sections are here, since those components are the
processes that read the tree (``api``: ``ApiSettings``, ``workers``: ``WorkerSettings``).
docs/configuration.md lists every variable, section by section. This ``__init__`` imports
nothing (docs/architecture.md): importers name the module.
"""
