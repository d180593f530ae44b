"""doclane's schema: the numbered SQL files beside this module, applied in order by
``doclane db migrate`` (pipeline.store.migrations).

A package only so that the files ship with doclane (package data): an installed doclane finds
them where it is installed, without a checkout beside it (``DOCLANE_MIGRATIONS_DIR`` still
points elsewhere when set). ``schema.sql`` is not a migration: it is what the migrations build,
written by scripts/schema_snapshot.py.
"""
