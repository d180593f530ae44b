"""No route of the API or the console reads a job past the wall between tenants.

Their modules reach jobs through a ``TenantView`` (``ApiContext.jobs_for``: the caller's scope
is what builds one), never through the store's own job reads, so a new route cannot forget whose
jobs its caller may see. ``/metrics`` alone reads the store's sums: aggregates with no token, the
figures the status page shows every visitor.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOORS = [ROOT / "pipeline" / "api", ROOT / "pipeline" / "console"]
#: Fleet-wide figures for anyone (no token, no job, no tenant's name but the labels').
AGGREGATES = {ROOT / "pipeline" / "api" / "metrics.py"}
#: The store's parts that read or change jobs whoever asks.
UNWALLED = {"reads", "admin", "operations", "attempts"}


def unwalled_reads(source: str) -> list[str]:
    """Each ``<...>.store.<part>`` of :data:`UNWALLED`, and ``.tenants.figures``, in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        named = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if (named == "store" and node.attr in UNWALLED) or (
            named == "tenants" and node.attr == "figures"
        ):
            found.append((node.lineno, f"line {node.lineno}: {named}.{node.attr}"))
    return [hit for _, hit in sorted(found)]


def test_the_finder_sees_the_stores_job_reads() -> None:
    source = (
        "ctx.store.reads.get_job(j)\n"
        "self.store.admin.list_jobs(f)\n"
        "store.operations.cancel(j)\n"
        "ctx.store.tenants.figures()\n"
        "ctx.store.tokens.list_all()\n"  # not a job: no wall to keep
        "jobs.job(j); ctx.admin.stats_deadline_s\n"
    )
    assert unwalled_reads(source) == [
        "line 1: store.reads",
        "line 2: store.admin",
        "line 3: store.operations",
        "line 4: tenants.figures",
    ]


def test_the_api_and_the_console_read_jobs_through_a_tenant_view_only() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} {hit}"
        for door in DOORS
        for path in sorted(door.rglob("*.py"))
        if path not in AGGREGATES
        for hit in unwalled_reads(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "read jobs through ctx.jobs_for(caller) (a TenantView):\n" + "\n".join(
        offenders
    )
