"""doclane's schema: the numbered SQL files beside this module, applied in order by
``doclane db migrate`` (pipeline.store.migrations).

A package only so that the files ship with doclane (package data): an installed doclane finds
them where it is installed, without a checkout beside it (``DOCLANE_MIGRATIONS_DIR`` still
points elsewhere when set). What they build, in one file: docs/schema.sql.
"""
