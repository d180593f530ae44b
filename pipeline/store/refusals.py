"""The database's refusals, as exceptions of their own.

The job state machine and the results' shape are the database's rules (see ``migrations/``): a
write that breaks one is refused with a SQLSTATE of doclane's own class ``DL``. The store
translates each into the exception below where it calls the database, so that callers catch
a type instead of comparing codes:

- ``ResultFormatsRefused`` (a ``ValueError``; SQLSTATE DL001): results that are not the job's
  formats. A bug of the caller, never worth a retry.
"""

from __future__ import annotations


class ResultFormatsRefused(ValueError):
    """Results that are not the formats their job asked for (SQLSTATE DL001)."""
