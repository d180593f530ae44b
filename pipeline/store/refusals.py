"""The database's refusals that a caller acts on, as exceptions it catches by name.

The job state machine lives in the database, which refuses some writes with SQLSTATEs of its
own; the store turns the ones a caller handles into these (the rest stay ``psycopg`` errors,
classified as E401 or E399 where they are caught).
"""

from __future__ import annotations


class FormatsMismatch(ValueError):
    """The database refused results that are not the job's formats (SQLSTATE DL001)."""
