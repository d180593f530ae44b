"""The job store: PostgreSQL as doclane's source of truth (psycopg 3 + psycopg_pool).

``JobStore`` (``pipeline.store.store``) is what a process opens: one ``StorePool`` (``pool``)
and the parts that stand on it, one for each kind of caller (``attempts.Attempts``,
``submissions.Submissions``, ``operations.Operations``, ``reads.Reads``, ``admin.AdminStore``).
``database``'s ``ensure_database`` / ``apply_migrations`` / ``migration_status`` set the database
up (the numbered SQL files of ``migrations/``). The state machine itself lives in the database;
its refusals are :mod:`pipeline.store.refusals`' exceptions.

This ``__init__`` imports nothing (docs/architecture.md): importers name the module, so
``doclane stats`` reads through the admin views' parts and loads neither the worker's claims nor
the submissions' writes.
"""
