"""``doclane stats | jobs | api``: the admin's commands, thin over ``pipeline.admin``.

``stats`` asks PostgreSQL, the broker and Redis at once and says which it could not reach
(exit 1 then, with what it could answer); ``jobs`` lists by filters, newest first; ``api``
serves the same views over HTTP with the status page.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Annotated, Any

import typer

from pipeline.admin.stats import Stats, collect_stats
from pipeline.jobs.model import Job, JobState
from pipeline.jobs.tenants import check_tenant_name
from pipeline.support import tracing

from .output import AS_JSON, echo_json, fail, render_tenants, usage_error
from .settings import command_settings
from .store_access import every_tenants_jobs, job_filter, open_store, parse_submission_id
from .wiring import broker_fleet, celery_publisher, counted_fleet

app = typer.Typer(add_completion=False)

#: What to do about a part ``doclane stats`` could not reach.
_REMEDIES = {
    "database": "check PostgreSQL and DOCLANE_DATABASE_URL (and `doclane db migrate`)",
    "broker": "check the broker (Redis or RabbitMQ) and DOCLANE_BROKER_URL",
    "workers": "check Redis (DOCLANE_REDIS_URL), where the workers' heartbeats are",
    "redis": "check Redis and DOCLANE_REDIS_URL (breaker state is shared there)",
}


# ---- stats -------------------------------------------------------------------------------------
@app.command()
def stats(
    as_json: bool = AS_JSON,
    watch: bool = typer.Option(False, "--watch", help="Refresh in place until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="Seconds between refreshes."),
) -> None:
    """Jobs by state, throughput, conversion times, failures, breakers, queues and workers."""
    tree = command_settings()
    settings, resilience = tree.admin, tree.resilience
    # Queue depths from the live workers' heartbeats while there are any: no broker client is
    # loaded for them (the API, a long-lived process, asks the broker itself).
    fleet = counted_fleet(resilience)
    with open_store(as_json) as store:
        figures = collect_stats(store, fleet, settings=settings, resilience=resilience)
        _show(figures, as_json=as_json, watch=watch)
        try:
            while watch:
                time.sleep(interval)  # the refresh period of --watch, not a synchronisation
                figures = collect_stats(store, fleet, settings=settings, resilience=resilience)
                _show(figures, as_json=as_json, watch=watch)
        except KeyboardInterrupt:  # Ctrl-C is how --watch ends
            typer.echo("", err=True)
    if figures.unreachable:
        for part, why in figures.unreachable.items():
            typer.echo(f"{part} unreachable ({why}): {_REMEDIES.get(part, '')}", err=True)
        raise typer.Exit(1)


def _show(figures: Stats, *, as_json: bool, watch: bool) -> None:
    if as_json:
        echo_json({"ok": not figures.unreachable, **figures.model_dump(mode="json")})
    else:  # --watch: home the cursor and clear the screen, then draw over the last one
        typer.echo(("\033[H\033[J" if watch else "") + render_stats(figures), nl=False)


def render_stats(s: Stats) -> str:
    """The readable form of ``doclane stats``."""
    lines = [f"doclane stats at {s.at.isoformat(timespec='seconds')}"]
    if s.jobs is not None:
        lines.append("jobs       " + "  ".join(f"{state} {n}" for state, n in s.jobs.items()))
    if s.throughput is not None:
        t = s.throughput
        lines.append(
            "finished   "
            + "  ".join(
                f"last {w.minutes}m {w.finished} ({w.per_minute:.1f}/min, {w.failed} failed)"
                for w in (t.last_1m, t.last_5m, t.last_60m)
            )
        )
    if s.conversion_time:
        window = f"{s.conversion_window_s / 60:g} min"
        lines.append(f"conversion p50/p95 by size tier, jobs succeeded in the last {window}")
        for tier in s.conversion_time:
            if tier.jobs:
                lines.append(
                    f"  {tier.tier:<7} {tier.jobs:>6} jobs  p50 {tier.p50_s:.2f}s  "
                    f"p95 {tier.p95_s:.2f}s"
                )
            else:
                lines.append(f"  {tier.tier:<7}      0 jobs")
    if s.batches_last_hour is not None and s.batches_last_hour.batches:
        batches = s.batches_last_hour
        lines.append(
            f"batches    last hour {batches.batches} ({batches.documents} documents, mean size "
            f"{batches.mean_size:g}, largest {batches.largest})"
        )
    if s.failures:
        lines.append("failures   last hour / all time")
        for f in s.failures:
            lines.append(f"  {f.code} {f.last_hour:>6} / {f.all_time:<8} {f.title}: {f.message}")
    if s.breakers is not None:
        lines.append("breakers")
        for b in s.breakers or []:
            reset = f", reset in {b.retry_after_s:.0f}s" if b.retry_after_s else ""
            lines.append(f"  {b.origin}  {b.state} ({b.failures}/{b.fail_max} failures{reset})")
    if s.queues is not None:
        lines.append("queued     " + "  ".join(f"{q.queue} {q.queued}" for q in s.queues))
    if s.bells is not None:
        counted = next((q for q in s.bells if q.counted_by), None)
        fresh = f"  ({counted.counted_by}'s count, {counted.age_s:.1f}s old)" if counted else ""
        lines.append("bells      " + "  ".join(f"{q.queue} {q.waiting}" for q in s.bells) + fresh)
    if s.webhooks is not None:
        lines.append("webhooks   " + "  ".join(f"{k} {n}" for k, n in s.webhooks.items()))
    if s.workers is not None:
        lines.append(f"workers    {len(s.workers)} alive")
        for w in s.workers:
            lines.append(f"  {w.name}  concurrency {w.concurrency}  tasks done {w.tasks_done}")
    if s.tenants:
        lines.append("tenants")
        lines.extend("  " + line for line in render_tenants(s.tenants).splitlines())
    return "\n".join(lines) + "\n"


# ---- jobs --------------------------------------------------------------------------------------
@app.command()
def jobs(
    *,
    state: Annotated[
        JobState | None, typer.Option("--state", help="Only jobs in this state.")
    ] = None,
    error_code: str | None = typer.Option(None, "--error-code", help="Only jobs with this code."),
    since: str | None = typer.Option(
        None, "--since", help="Only jobs submitted since: 30m, 1h, 2d, or an ISO time."
    ),
    queue: str | None = typer.Option(None, "--queue", help="Only jobs of this queue."),
    submission: str | None = typer.Option(
        None,
        "--submission",
        help="Only the jobs of one submission (the id `submit` prints, or its first characters).",
    ),
    old_submission: str | None = typer.Option(
        None, "--batch", hidden=True, help="The old name of --submission."
    ),
    tenant: str | None = typer.Option(None, "--tenant", help="Only the jobs of this tenant."),
    limit: int = typer.Option(50, "--limit", min=1, max=10000, help="At most this many."),
    as_json: bool = AS_JSON,
) -> None:
    """List jobs, newest first."""
    # Here, not at the top: the job views' module (its models) is no part of `doclane stats`.
    from pipeline.admin.jobs import list_jobs

    filters = job_filter(
        state, error_code=error_code, since=since, queue=queue, limit=limit, as_json=as_json
    )
    submission = submission or old_submission
    if tenant is not None:
        try:
            filters = replace(filters, tenant=check_tenant_name(tenant))
        except ValueError as exc:
            usage_error(str(exc), as_json)
    with open_store(as_json) as store:
        if submission is not None:
            filters = replace(filters, submission=parse_submission_id(store, submission, as_json))
        found = list_jobs(every_tenants_jobs(store), filters)
    if as_json:
        echo_json({"ok": True, "jobs": [j.model_dump(mode="json") for j in found]})
        return
    for job in found:
        typer.echo(_job_line(job))
    if not found:
        typer.echo("no jobs match", err=True)


def _job_line(job: Job) -> str:
    state = job.state.value + (f" ({job.error_code})" if job.error_code else "")
    created = job.created_at.isoformat(timespec="seconds")
    return f"{job.id}  {state:<18} {job.queue:<15} {job.tenant:<12} {created}  {job.source_uri}"


# ---- api ---------------------------------------------------------------------------------------
@app.command()
def api(
    host: str | None = typer.Option(None, "--host", help="Listen address (DOCLANE_API_HOST)."),
    port: int | None = typer.Option(None, "--port", help="Listen port (DOCLANE_API_PORT)."),
) -> None:
    """Serve the HTTP API, /metrics and the status page (uvicorn)."""
    from pipeline.api.context import ApiContext
    from pipeline.site import serve

    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["api_host"] = host
    if port is not None:
        overrides["api_port"] = port
    tree = command_settings(api=overrides)
    settings = tree.api
    if not settings.tokens():
        from errors import InvalidSetting

        unset = InvalidSetting(
            "DOCLANE_API_TOKEN is not set, nor DOCLANE_API_TOKENS: set the tokens clients must "
            "send (DOCLANE_API_TOKENS=name:role:token,...)",
            detail={"variables": ["DOCLANE_API_TOKEN", "DOCLANE_API_TOKENS"]},
        )
        fail(unset, False)
    with (
        open_store(False) as store,
        celery_publisher() as publisher,
        broker_fleet() as fleet,
    ):
        ctx = ApiContext(tree=tree, store=store, publisher=publisher, fleet=fleet)
        tracing.configure("doclane-api")  # jobs submitted over HTTP start their traces here
        serve(ctx)


__all__ = ["app", "render_stats"]
