"""Plumbing every package of doclane may use, and which knows nothing of jobs, servers or
stores: names imported on first use (:mod:`.lazy`) and job-aware logging with secrets masked
(:mod:`.logs`)."""
