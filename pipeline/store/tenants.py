"""Tenants in the store: made and changed by operators, read with their jobs' figures.

What ``doclane tenants``, the API (its tokens' tenants, per-tenant stats, a quota refusal's
Retry-After) and the console read and write (a :class:`~pipeline.store.store.JobStore` has one
as its ``tenants``). Every worker reads the limits from the same row at its next claim, so a change
here is obeyed at once, fleet-wide. A submission's quota is checked in its own transaction
(:mod:`pipeline.store.submissions`), not here: only there is the count exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg.rows import dict_row

from pipeline.jobs.tenants import WEIGHT_MAX, WEIGHT_MIN, Tenant, TenantFigures, check_tenant_name
from pipeline.store.pool import OnPool
from pipeline.store.queries import query


class _Unset:
    """A field :meth:`Tenants.set` leaves as it is (None clears a limit)."""

    def __repr__(self) -> str:
        return "UNSET"


#: Leave the field as it is.
UNSET: Any = _Unset()

#: The window of a tenant's finished figures, in minutes.
FIGURES_WINDOW_MINUTES = 60


class Tenants(OnPool):
    """Tenants through ``pool``."""

    def set(
        self,
        name: str,
        *,
        weight: int | None = UNSET,
        max_running: int | None = UNSET,
        max_queued: int | None = UNSET,
    ) -> Tenant:
        """Make ``name`` or change it: only the fields given change; None clears a limit
        (``weight=None`` is its default, 1). ``ValueError`` for a bad name or value."""
        check_tenant_name(name)
        if weight is not UNSET and weight is not None and not WEIGHT_MIN <= weight <= WEIGHT_MAX:
            raise ValueError(f"a weight is {WEIGHT_MIN} to {WEIGHT_MAX}, not {weight}")
        for field, value in (("max_running", max_running), ("max_queued", max_queued)):
            if value is not UNSET and value is not None and value < 0:
                raise ValueError(f"{field} is 0 or more (or none), not {value}")
        params = {
            "name": name,
            "weight": None if weight is UNSET else weight,
            "max_running": None if max_running is UNSET else max_running,
            "max_queued": None if max_queued is UNSET else max_queued,
            "set_weight": weight is not UNSET,
            "set_max_running": max_running is not UNSET,
            "set_max_queued": max_queued is not UNSET,
        }
        if params["set_weight"] and weight is None:
            params["weight"] = WEIGHT_MIN
        with self.pool.connection("setting a tenant") as conn:
            row = conn.cursor(row_factory=dict_row).execute(query("set_tenant"), params).fetchone()
        return Tenant.model_validate(row)

    def get(self, name: str) -> Tenant | None:
        rows = self.pool.fetch_rows("reading a tenant", query("get_tenant"), {"name": name})
        return Tenant.model_validate(rows[0]) if rows else None

    def list_all(self) -> list[Tenant]:
        """Every tenant by name, without figures (a form's choices)."""
        rows = self.pool.fetch_rows("listing tenants", query("list_tenants"), {})
        return [Tenant.model_validate(row) for row in rows]

    def ensure(self, names: Iterable[str]) -> None:
        """Make each of ``names`` that does not exist yet (with no limits, weight 1)."""
        wanted = sorted({check_tenant_name(name) for name in names})
        if wanted:
            with self.pool.connection("making tenants") as conn:
                conn.execute(query("ensure_tenants"), {"names": wanted})

    def figures(self, name: str | None = None) -> list[TenantFigures]:
        """Every tenant (or only ``name``) by name, with its jobs queued and running now and
        finished over the last hour."""
        params = {"name": name, "window_minutes": FIGURES_WINDOW_MINUTES}
        rows = self.pool.fetch_rows("reading tenants' figures", query("tenant_figures"), params)
        return [
            TenantFigures(
                tenant=Tenant.model_validate(row),
                queued=int(row["queued"]),
                running=int(row["running"]),
                succeeded=int(row["succeeded"]),
                failed=int(row["failed"]),
                cancelled=int(row["cancelled"]),
                window_minutes=FIGURES_WINDOW_MINUTES,
                per_minute=round(int(row["last_5m"]) / 5, 2),
            )
            for row in rows
        ]

    def finished_since(self, name: str, window_s: float) -> int:
        """How many of ``name``'s jobs finished within the last ``window_s`` seconds."""
        params = {"name": name, "window_s": float(window_s)}
        rows = self.pool.fetch_rows("measuring a tenant", query("tenant_finished_since"), params)
        return int(rows[0]["finished"])
