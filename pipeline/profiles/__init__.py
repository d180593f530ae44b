"""Tool profiles: how one document becomes tool calls on a given kind of server.

The server's tool list (read at initialize) decides which contract applies: ``docling-rs``
(docling.rs's server: one ``convert`` call per format), ``docling-mcp`` (convert into the
server's cache, then export) or ``per-format`` (the design seed's eight tools).
:func:`pipeline.profiles.selection.select_profile` picks one for the formats a job wants, or
raises E305.

This ``__init__`` imports nothing (docs/architecture.md): importers name the module, so the
settings tree reads ``ProfileSettings`` (``pipeline.profiles.settings``) in every process
(``doclane stats`` too) without loading the profiles. ``base``: ``Profile``, ``ToolClient``,
``Conversion`` and the call records; ``docling_mcp``, ``docling_rs``, ``per_format``: one profile
each; ``selection``: ``select_profile``, ``available_profiles``.
"""
