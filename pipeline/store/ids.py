"""Short ids: a job or a submission named by the first characters of its id.

The console shows ids by their first 8 characters, and people copy what they see; every door
(the CLI, the API's paths and filters, the console's box) takes a unique prefix of at least
:data:`SHORT_ID_MIN` hex digits, resolved here, by one indexed query (``sql/ids.sql``), into
the whole id. A prefix more than one id has is E121 (how many), one no id has E108; a whole id
is taken as it is, with no query (whoever reads the job says E108 when there is none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

from errors import AmbiguousId, JobNotFound

#: The fewest hex digits a short id may have: 16 million ranges, so at a million jobs a prefix
#: this long is nearly always one job's, and a typo is a clear E108 rather than another job.
SHORT_ID_MIN = 6

#: An id or its start as a schema says it (the API's paths and filter): 6 to 32 hex digits,
#: bare or with the id's dashes after its first 8; every text it matches :func:`id_range` takes.
ID_PATTERN = (
    r"^(?:[0-9A-Fa-f]{6,32}|[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{0,4}){1,3}(?:-[0-9A-Fa-f]{0,12})?)$"
)

_HEX = re.compile(r"^[0-9a-f]{1,32}$")


@dataclass(frozen=True, slots=True)
class IdRange:
    """The ids that start with a prefix, as the closed range of uuids they fill."""

    prefix: str
    low: UUID
    high: UUID

    @property
    def whole(self) -> UUID | None:
        """The id itself when the prefix is all of it."""
        return self.low if self.low == self.high else None


def id_range(text: str, what: str = "job") -> IdRange:
    """The range of ids ``text`` (a whole id, or its first characters, dashes or not) names;
    ``ValueError`` saying what an id looks like when it is neither."""
    given = text.strip().lower()
    digits = given.replace("-", "")
    if not _HEX.match(digits) or (len(digits) < 32 and len(digits) < SHORT_ID_MIN):
        raise ValueError(
            f"not a {what} id: {text[:60]!r} (give the id, or at least its first "
            f"{SHORT_ID_MIN} characters)"
        )
    if len(digits) == 32:
        whole = UUID(digits)
        return IdRange(given, whole, whole)
    return IdRange(given, UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f")))


def one_of(found: list[tuple[UUID, int]], asked: IdRange, what: str) -> UUID:
    """The one id the prefix query found; E108 for none, E121 for more (saying how many)."""
    if not found:
        raise JobNotFound(
            f"no {what} id starts with {asked.prefix!r}", detail={"id_prefix": asked.prefix}
        )
    matches = found[0][1]
    if matches > 1:
        shown = ", ".join(str(i) for i, _ in found)
        raise AmbiguousId(
            f"{matches} {what}s have an id that starts with {asked.prefix!r} ({shown}"
            + (", ..." if matches > len(found) else "")
            + "): give more of the id",
            detail={"id_prefix": asked.prefix, "matches": matches},
        )
    return found[0][0]
