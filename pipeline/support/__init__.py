"""Plumbing every package of doclane may use, and which knows nothing of jobs, servers or
stores: job-aware logging with secrets masked (:mod:`.logs`), the secret masker
(:mod:`.secrets`), waits, closing and tracing helpers. Like every package's ``__init__``, this
one imports nothing: importers name the module."""
