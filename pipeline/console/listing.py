"""The console's job list: its filters read from the query string, and its keyset cursor.

The list is ``pipeline.admin.jobs.list_jobs`` (one index range scan whatever the page, newest
first); the next page's link carries the last row's ``created_at`` and ``id`` as the cursor (and
every filter, a submission's id too), so page 500 costs what page 1 costs at a million jobs
(``python -m bench.console_pages`` measures it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode
from uuid import UUID

from pipeline.admin.jobs import page_cursor, parse_cursor, parse_since
from pipeline.jobs.model import Job, JobState
from pipeline.jobs.tenants import TENANT_PATTERN
from pipeline.store.admin import JobFilter

PAGE_SIZE = 50
_CODE = re.compile(r"^E\d{3}$")
_TENANT = re.compile(TENANT_PATTERN)


class BadFilter(ValueError):
    """A filter the list cannot apply (shown above the list, which then shows nothing)."""


@dataclass(frozen=True)
class ListQuery:
    """The filters as typed (to fill the form again) and as the store takes them."""

    state: str = ""
    error_code: str = ""
    queue: str = ""
    since: str = ""
    until: str = ""
    before: str = ""
    #: A submission's id (``doclane submit`` prints it; a job's page links to it).
    submission: str = ""
    #: A tenant's name (an admin's filter; a tenant's token lists its own jobs whatever it asks).
    tenant: str = ""

    def to_filter(self, limit: int = PAGE_SIZE) -> JobFilter:
        """The store's filter; :class:`BadFilter` naming what is wrong."""
        try:
            state = JobState(self.state) if self.state else None
        except ValueError:
            raise BadFilter(f"no state {self.state!r}") from None
        if self.error_code and not _CODE.match(self.error_code):
            raise BadFilter(f"an error code looks like E101, not {self.error_code!r}")
        if self.tenant and not _TENANT.match(self.tenant):
            raise BadFilter(f"not a tenant name: {self.tenant[:70]!r}")
        return JobFilter(
            state=state,
            error_code=self.error_code or None,
            queue=self.queue or None,
            submission=_submission(self.submission) if self.submission else None,
            tenant=self.tenant or None,
            since=_moment(self.since),
            until=_moment(self.until),
            before=_cursor(self.before) if self.before else None,
            limit=limit,
        )

    def link(self, **changes: str) -> str:
        """This list's URL with some filters changed (empty ones left out)."""
        values = {**self.__dict__, **changes}
        return "/console/jobs?" + urlencode({k: v for k, v in values.items() if v})

    def next_page(self, jobs: list[Job]) -> str | None:
        """The link to the page after ``jobs``, or None when this page was the last."""
        if len(jobs) < PAGE_SIZE:
            return None
        return self.link(before=page_cursor(jobs[-1]))


def _moment(text: str) -> datetime | None:
    if not text:
        return None
    try:
        return parse_since(text)
    except (ValueError, OverflowError) as exc:
        raise BadFilter(str(exc)) from None


def _submission(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise BadFilter(f"a submission id is a UUID, not {text[:60]!r}") from None


def _cursor(text: str) -> tuple[datetime, UUID]:
    try:
        return parse_cursor(text)
    except ValueError:
        raise BadFilter("the page link is damaged: start again from the newest") from None
