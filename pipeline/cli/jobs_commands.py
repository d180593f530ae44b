"""``doclane submit | status | result | cancel | retry``: a submitter's commands.

``submit`` validates every source, commits the jobs, then publishes their ids; ``--wait``
follows them to the end (``waiting``: progress on stderr, so ``--json`` stays clean on stdout).
Exit codes for scripts: 0 when every source became a job (and, with ``--wait``, every job
succeeded), 1 when some source was refused or some job did not succeed, 2 for usage errors.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, NoReturn
from uuid import UUID

import typer

from errors import PipelineError, error_for
from pipeline.access.audit import audited_cli, submission_detail
from pipeline.jobs.formats import Formats
from pipeline.jobs.model import Job, JobEvent, JobState
from pipeline.jobs.options import ConversionOptions
from pipeline.jobs.request import SubmissionRequest
from pipeline.jobs.tenants import check_tenant_name
from pipeline.queues import PRIORITY_LEVELS, Wakeup, ring
from pipeline.store.store import JobStore
from pipeline.submission.door import door_for
from pipeline.submission.intake import Submission, enqueue
from pipeline.support import tracing

from .output import AS_JSON, echo_json, fail, state_error, usage_error
from .settings import command_settings
from .store_access import (
    every_tenants_jobs,
    get_job,
    job_filter,
    no_such_job,
    open_store,
    parse_job_id,
)
from .waiting import say_gave_up, wait_for
from .wiring import celery_publisher

if TYPE_CHECKING:
    from pipeline.admin.jobs import RetryOutcome

app = typer.Typer(add_completion=False)

_JOB_ID = typer.Argument(
    ..., help="The job's id, or its first characters (at least 6, as the console shows them)."
)


# ---- submit ------------------------------------------------------------------------------------
@app.command()
def submit(
    sources: Annotated[
        list[str], typer.Argument(help="Files, folders (recursive), globs or http(s) URLs.")
    ],
    *,
    to: str = typer.Option(
        "md", "--to", help="Output formats, comma-separated: md, json, html, text, chunks."
    ),
    priority: int = typer.Option(
        0,
        "--priority",
        help="Higher runs first: waiting jobs leave the broker by priority,"
        f" {PRIORITY_LEVELS[0]} (default) to {PRIORITY_LEVELS[-1]} (above counts as the highest,"
        " below as the lowest); a running job is never interrupted.",
    ),
    no_dedup: bool = typer.Option(
        False, "--no-dedup", help="Convert again even if the same content already succeeded."
    ),
    wait: bool = typer.Option(False, "--wait", help="Wait until every job has finished."),
    timeout: float | None = typer.Option(
        None, "--timeout", help="With --wait: give up waiting after this many seconds."
    ),
    pages: str | None = typer.Option(
        None, "--pages", help="Convert only these pages: 1-5 or 3 (PDFs)."
    ),
    ocr_lang: str | None = typer.Option(
        None, "--ocr-lang", help="The OCR language(s), e.g. en or en,de (scans and images)."
    ),
    text_layer_only: bool = typer.Option(
        False, "--text-layer-only", help="Read PDFs from their text layer only (no layout, no OCR)."
    ),
    password_env: str | None = typer.Option(
        None,
        "--password-env",
        help="The environment variable holding the documents' password, on the workers; the "
        "password itself is never stored or shown.",
    ),
    webhook: str | None = typer.Option(
        None,
        "--webhook",
        help="POST a signed event to this URL when each job ends (default: $DOCLANE_WEBHOOK_URL).",
    ),
    tenant: str | None = typer.Option(
        None,
        "--tenant",
        help="Whose jobs these are (default: $DOCLANE_TENANT, else default); it must exist "
        "(doclane tenants list), and its --max-queued quota applies.",
    ),
    as_json: bool = AS_JSON,
) -> None:
    """Submit documents for conversion; prints one job id per source (or why it was refused)."""
    try:
        formats = Formats.parse(to)
    except ValueError as exc:
        usage_error(str(exc), as_json)
    try:  # before any connection: a bad page range is the submitter's to fix (E110)
        options = ConversionOptions(
            pages=pages,
            ocr_lang=ocr_lang,
            text_layer_only=text_layer_only,
            password_env=password_env,
        )
    except PipelineError as exc:
        fail(exc, as_json)
    if tenant is not None:
        try:
            check_tenant_name(tenant)
        except ValueError as exc:
            usage_error(str(exc), as_json)
    tree = command_settings()
    asked = SubmissionRequest(
        sources,
        formats,
        options,
        priority,
        dedup=not no_dedup,
        webhook_url=webhook or tree.webhooks.webhook_url,
        tenant=tenant or tree.submit.tenant,
    )
    tracing.configure("doclane-cli")  # each job's trace starts here (off without OTEL_*)
    with (
        open_store(as_json) as store,
        celery_publisher() as publisher,
        tracing.span("doclane submit"),
    ):
        try:
            # Recorded as the API records a submission: who, how many jobs, the outcome (a
            # refusal's code when no source became a job).
            with audited_cli(store, "submit", None, tenant=asked.tenant) as trail:
                submission = enqueue(
                    asked,
                    publisher=publisher,
                    store=store,
                    source_settings=tree.sources,
                    submit_settings=tree.submit,
                    door=door_for(tree.mcp, tree.profiles),
                )
                trail.update(_audited(submission, asked.tenant))
        except PipelineError as exc:
            fail(exc, as_json)
        waited = None
        if wait:
            waited = wait_for(
                store, submission.job_ids, timeout, resilience=tree.resilience, quiet=as_json
            )
    jobs = waited.jobs if waited is not None else None
    ok = not submission.rejected and (jobs is None or all(_succeeded(j) for j in jobs))
    if as_json:
        out = {"ok": ok, **submission.to_dict()}
        if waited is not None:
            out["jobs"] = [_job_summary(j) for j in waited.jobs]
            if waited.gave_up is not None:
                out["wait"] = waited.gave_up.to_dict()
        echo_json(out)
    else:
        _print_submission(submission, jobs)
        if waited is not None and waited.gave_up is not None:
            say_gave_up(waited.gave_up)
    if not ok:
        raise typer.Exit(1)


def _audited(submission: Submission, tenant: str) -> dict[str, Any]:
    """The trail's detail of ``submission``, and its outcome when every source was refused."""
    detail = submission_detail(
        tenant=tenant,
        submission_id=submission.id,
        jobs=len(submission.accepted),
        refused=len(submission.rejected),
    )
    if submission.rejected and not submission.accepted:
        detail["outcome"] = submission.rejected[0].code
    return detail


def _succeeded(job: Job) -> bool:
    return job.state is JobState.SUCCEEDED


def _print_submission(submission: Submission, jobs: list[Job] | None) -> None:
    states = {j.id: j for j in jobs or []}
    for item in submission.accepted:
        job = states.get(item.job_id)
        note = " (deduplicated)" if item.deduplicated else ""
        if not item.published and not item.deduplicated:
            note += " (not yet published: the reconciler will)"
        shown = f" {_state_text(job)}" if job is not None else f" {item.queue}"
        typer.echo(f"{item.job_id}{shown}  {item.source}{note}")
    for rejected in submission.rejected:
        typer.echo(f"refused {rejected.code}  {rejected.source}: {rejected.message}", err=True)
    if submission.skipped:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(submission.skipped.items()))
        typer.echo(f"skipped in folders: {skipped}", err=True)
    if submission.accepted:
        typer.echo(
            f"submission {submission.id}: doclane jobs --submission {submission.id}", err=True
        )


# ---- status ------------------------------------------------------------------------------------
@app.command()
def status(
    job_id: str = _JOB_ID,
    events: bool = typer.Option(True, "--events/--no-events", help="Show the job's history."),
    as_json: bool = AS_JSON,
) -> None:
    """Show a job: state, stage, attempt, error, results and its history."""
    with open_store(as_json) as store:
        jid = parse_job_id(store, job_id, as_json)
        job = get_job(store, jid, as_json)
        results = store.reads.list_results(jid)
        trail = store.reads.events(jid) if events else []
    if as_json:
        out: dict[str, Any] = {
            "ok": True,
            "job": job.model_dump(mode="json"),
            "results": [r.model_dump(mode="json") for r in results],
        }
        if events:
            out["events"] = [e.model_dump(mode="json") for e in trail]
        echo_json(out)
        return
    typer.echo(f"job      {job.id}")
    typer.echo(f"state    {_state_text(job)}")
    typer.echo(f"source   {job.source_kind.value} {job.source_uri}")
    if job.submission_id:
        sid = job.submission_id
        typer.echo(f"submission {sid} (doclane jobs --submission {sid})")
    if job.parent_id is not None:
        typer.echo(f"slice    pages {job.options.get('pages')} of job {job.parent_id}")
    typer.echo(f"queue    {job.queue}   formats {', '.join(job.formats)}   priority {job.priority}")
    typer.echo(
        f"attempt  {job.attempt} ({job.attempts_spent} of {job.max_attempts} charged)"
        + (f"   worker {job.lease_owner}" if job.lease_owner else "")
        + (f"   server {job.server_origin}" if job.server_origin else "")
    )
    if job.next_attempt_at:
        typer.echo(f"next try {job.next_attempt_at.isoformat(timespec='seconds')}")
    if job.error_code:
        typer.echo(f"error    {job.error_code}: {job.error_message}")
    for r in results:
        typer.echo(f"result   {r.format}: {r.size_bytes} bytes (attempt {r.attempt})")
    if events:
        typer.echo("history")
        for event in trail:
            typer.echo(f"  {_event_text(event)}")


def _state_text(job: Job) -> str:
    if job.slices_total is not None:  # a split document's progress: its slices
        return f"{job.state.value} ({job.slices_done} of {job.slices_total} slices done)"
    if job.state is JobState.RUNNING and job.stage is not None:
        return f"running ({job.stage.value})"
    if job.state in (JobState.FAILED, JobState.RETRYING) and job.error_code:
        where = f" while {job.stage.value}" if job.stage is not None else ""
        return f"{job.state.value} ({job.error_code}{where})"
    return job.state.value


def _event_text(event: JobEvent) -> str:
    at = event.at.isoformat(timespec="milliseconds")
    if event.kind.value == "state_change":
        before = event.from_state.value if event.from_state else "new"
        after = event.to_state.value if event.to_state else "?"
        text = f"{before} -> {after}"
        if event.error_code:
            text += f" {event.error_code}"
        reason = (event.detail or {}).get("reason") or (event.detail or {}).get("error_message")
        if reason:
            text += f" ({reason})"
    elif event.kind.value == "mcp_call":
        text = f"{event.tool} {event.outcome} {event.duration_ms or 0:.0f} ms"
        if event.error_code:
            text += f" {event.error_code}"
        if event.server_origin:
            text += f" @ {event.server_origin}"
    else:
        detail = event.detail or {}
        text = str(detail.get("note") or detail.get("reason") or detail)
    return f"{at}  #{event.attempt}  {text}"


# ---- result ------------------------------------------------------------------------------------
@app.command()
def result(
    job_id: str = _JOB_ID,
    fmt: str = typer.Option(
        "md", "--format", "-f", help="Which result: md, json, html, text, chunks."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """Print one result of a succeeded job (streamed as stored, byte for byte)."""
    with open_store(as_json) as store:
        jid = parse_job_id(store, job_id, as_json)
        if as_json:
            content = store.reads.get_result(jid, fmt)
            if content is None:
                _no_result(store, jid, fmt, as_json)
            echo_json({"ok": True, "job_id": str(jid), "format": fmt, "content": content})
            return
        sys.stdout.flush()
        written = store.reads.write_result(jid, fmt, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        if written is None:
            _no_result(store, jid, fmt, as_json)


def _no_result(store: JobStore, jid: UUID, fmt: str, as_json: bool) -> NoReturn:
    job = get_job(store, jid, as_json)
    if job.state is JobState.SUCCEEDED:
        usage_error(f"job {jid} has no {fmt} result (it has: {', '.join(job.formats)})", as_json)
    state_error(f"job {jid} is {_state_text(job)}: no results", as_json)


# ---- cancel and retry --------------------------------------------------------------------------
@app.command()
def cancel(job_id: str = _JOB_ID, as_json: bool = AS_JSON) -> None:
    """Cancel a queued, retrying or running job; a running one is stopped and never stored.

    Only the job's row changes. A running attempt notices at its next lease renewal
    (``DOCLANE_CANCEL_CHECK_S``), withdraws its MCP call and writes nothing; its queue is rung
    once, since its tenant's running slot is free now. No worker process is signalled, so no
    other job is disturbed, and the broker need not be reachable (a bell refused is logged;
    the reconciler rings within an interval).
    """
    with open_store(as_json) as store:
        jid = parse_job_id(store, job_id, as_json)
        with audited_cli(store, "cancel", str(jid)) as trail:
            cancellation = store.operations.cancel(jid, reason="cancelled by doclane cancel")
            trail["outcome"] = "ok" if cancellation is not None else "wrong_state"
        if cancellation is None:
            job = get_job(store, jid, as_json)
            state_error(f"job {jid} is already {job.state.value}", as_json)
    running = cancellation.previous_state is JobState.RUNNING
    if running:  # its tenant's running slot is free now: a capped tenant's next job may go
        with celery_publisher() as publisher:
            ring(publisher, [Wakeup(cancellation.job.queue, priority=cancellation.job.priority)])
    if as_json:
        out = {
            "ok": True,
            "job_id": str(jid),
            "previous_state": cancellation.previous_state.value,
            "state": cancellation.job.state.value,
            "stopping": running,
        }
        echo_json(out)
    else:
        note = "; its running attempt stops within seconds" if running else ""
        typer.echo(f"{jid} cancelled (was {cancellation.previous_state.value}){note}")


@app.command()
def retry(
    job_id: str | None = typer.Argument(None, help="The job's id (or --failed for many)."),
    *,
    failed: bool = typer.Option(False, "--failed", help="Retry failed jobs in bulk."),
    error_code: str | None = typer.Option(
        None, "--error-code", help="With --failed: only jobs that failed with this code."
    ),
    since: str | None = typer.Option(
        None, "--since", help="With --failed: only jobs submitted since (30m, 1h, 2d, ISO)."
    ),
    limit: int = typer.Option(1000, "--limit", min=1, help="With --failed: at most this many."),
    as_json: bool = AS_JSON,
) -> None:
    """Run a job again: a waiting one now, a failed or cancelled one as a new job.

    Finished jobs never change (their history stays as it was); retrying one submits its source
    again with the same formats and priority, and prints the new job's id. ``--failed`` does
    that for every failed job matching the filters, newest first.
    """
    if failed == (job_id is not None):
        usage_error("give either a job id or --failed (with its filters)", as_json)
    if failed:
        _retry_failed(error_code, since, limit, as_json)
        return
    assert job_id is not None
    from errors import JobNotFound
    from pipeline.admin.jobs import WrongState, retry_job

    with open_store(as_json) as store, celery_publisher() as publisher:
        jid = parse_job_id(store, job_id, as_json)
        try:
            with audited_cli(store, "retry", str(jid)) as trail:
                outcome = retry_job(every_tenants_jobs(store), publisher, jid)
                trail.update(_retried(outcome))
        except JobNotFound:
            no_such_job(jid, as_json)
        except WrongState as exc:
            state_error(str(exc), as_json)
    if outcome.action == "refused":  # the source no longer passes its checks: its own code
        refused = error_for(outcome.code or "E399", outcome.message, detail={"retry_of": str(jid)})
        fail(refused, as_json)
    if as_json:
        out: dict[str, Any] = {"ok": True, "job_id": str(outcome.job_id), "action": outcome.action}
        if outcome.action == "resubmitted":
            out["retry_of"] = str(jid)
        echo_json(out)
    elif outcome.action == "published":
        typer.echo(f"{jid} published again")
    else:
        typer.echo(f"{outcome.job_id} submitted again (retry of {jid})")


def _retry_failed(error_code: str | None, since: str | None, limit: int, as_json: bool) -> None:
    from pipeline.admin.jobs import retry_failed

    filters = job_filter(
        JobState.FAILED,
        error_code=error_code,
        since=since,
        queue=None,
        limit=limit,
        as_json=as_json,
    )
    asked = {"error_code": error_code, "since": since}
    with (
        open_store(as_json) as store,
        celery_publisher() as publisher,
        audited_cli(store, "retry_failed", None, **asked) as trail,
    ):
        outcomes = retry_failed(
            every_tenants_jobs(store),
            publisher,
            error_code=filters.error_code,
            since=filters.since,
            limit=limit,
        )
        trail["retried"] = sum(o.action != "refused" for o in outcomes)
        trail["refused"] = sum(o.action == "refused" for o in outcomes)
    refused = [o for o in outcomes if o.action == "refused"]
    if as_json:
        echo_json({"ok": not refused, "retried": [o.model_dump(mode="json") for o in outcomes]})
    else:
        for o in outcomes:
            if o.action == "refused":
                typer.echo(f"refused {o.code}  {o.retry_of}: {o.message}", err=True)
            else:
                typer.echo(f"{o.job_id} submitted again (retry of {o.retry_of})")
        typer.echo(f"{len(outcomes) - len(refused)} job(s) retried, {len(refused)} refused")
    if refused:
        raise typer.Exit(1)


# ---- helpers -----------------------------------------------------------------------------------
def _retried(outcome: RetryOutcome) -> dict[str, Any]:
    """What the audit trail keeps of one retry: its new job, or the refusal's code."""
    if outcome.action == "refused":
        return {"outcome": outcome.code or "refused"}
    return {"action": outcome.action, "job_id": str(outcome.job_id)}


def _job_summary(job: Job) -> dict[str, Any]:
    return {
        "job_id": str(job.id),
        "source": job.source_uri,
        "state": job.state.value,
        "attempt": job.attempt,
        "error_code": job.error_code,
        "error_message": job.error_message,
    }


__all__: Sequence[str] = ("app",)
