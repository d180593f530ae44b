"""Tenants as values: who shares the fleet, what each may run and queue, and how it is doing.

A tenant is a name an operator made (``doclane tenants set``; an API token's tenant is made when
the API starts); ``default`` always exists and owns every job submitted without one. The rules
(the name's shape, a weight's range, limits not negative) are the database's (migration 0019);
the pattern is repeated here so that a door (the CLI, the API's settings) can refuse a bad name
before it asks the database anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from errors import InvalidArgument

#: A tenant's name, as ``tenants.name``'s check (migration 0019) allows it.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
#: The tenant of every job submitted without one.
DEFAULT_TENANT = "default"
#: A weight's bounds (``tenants.weight``'s check).
WEIGHT_MIN, WEIGHT_MAX = 1, 1000

_NAME = re.compile(TENANT_PATTERN)


def check_tenant_name(name: str) -> str:
    """``name`` when it may name a tenant; ``ValueError`` saying the rule otherwise."""
    if not name:
        raise ValueError(
            "an empty tenant name: name a tenant, or leave the tenant out (for a token or a "
            "filter: every tenant; for a submission: default)"
        )
    if not _NAME.match(name):
        raise ValueError(
            f"not a tenant name: {name!r} (lower-case letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 63 characters)"
        )
    return name


@dataclass(frozen=True, slots=True)
class TenantScope:
    """Whose jobs a caller may read and act on: exactly one tenant's, or every tenant's
    (:data:`EVERY_TENANT`, the one value that means so; its ``tenant`` is None).

    A type rather than a name checked by hand in each handler: the store's
    :class:`~pipeline.store.scoped.TenantView` is built from one, so no door reads a job
    without saying whose jobs it may see. An empty or malformed name is refused (E117): ``""``
    is no way to say "every tenant".
    """

    tenant: str | None

    def __post_init__(self) -> None:
        if self.tenant is not None:
            try:
                check_tenant_name(self.tenant)
            except ValueError as exc:
                raise InvalidArgument(str(exc), detail={"tenant": self.tenant[:70]}) from None

    @property
    def every(self) -> bool:
        return self.tenant is None

    def covers(self, tenant: str) -> bool:
        """Whether a job of ``tenant`` exists for this scope (else it is answered as none)."""
        return self.tenant is None or self.tenant == tenant

    def __str__(self) -> str:
        return "every tenant" if self.tenant is None else f"tenant {self.tenant}"


#: The scope of an operator, an admin token of no tenant, the CLI: every tenant's jobs.
EVERY_TENANT = TenantScope(None)


def scope_of(tenant: str | None) -> TenantScope:
    """The scope of a token, a claim or a session that names ``tenant``, or names none (None:
    :data:`EVERY_TENANT`). A name that is present but empty is refused with E117, never read as
    every tenant."""
    return EVERY_TENANT if tenant is None else TenantScope(tenant)


class Tenant(BaseModel):
    """A row of ``tenants``: its share of the fleet and its limits (None: no limit)."""

    model_config = ConfigDict(frozen=True)

    name: str
    #: Served this many times as often as a tenant of weight 1 when both have work.
    weight: int = 1
    #: At most this many of its jobs running across the fleet; 0 pauses its conversions.
    max_running: int | None = None
    #: At most this many of its jobs queued; a submission past it is refused (E115).
    max_queued: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def paused(self) -> bool:
        return self.max_running == 0


class TenantFigures(BaseModel):
    """A tenant and how its jobs stand now: queued and running right now, and what finished over
    the last ``window_minutes`` (``doclane tenants list``, ``doclane stats``, ``GET /v1/stats``)."""

    model_config = ConfigDict(frozen=True)

    tenant: Tenant
    queued: int = 0
    running: int = 0
    #: Jobs that succeeded, failed for good, and were cancelled within the window.
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    window_minutes: int = 60
    #: Jobs finished per minute over the last five minutes.
    per_minute: float = 0.0
