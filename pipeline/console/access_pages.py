"""The console's access pages, for operators (admins of every tenant): the stored tokens (made,
listed, revoked) and the audit trail. What ``doclane tokens`` and ``doclane audit`` do, and
``/v1/tokens`` and ``/v1/audit``; a change is a POST with the session's CSRF token, and is
recorded in the trail like the API's (the middleware sees the console's requests too)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response

from errors import InvalidArgument
from pipeline.access.tokens import issue_token
from pipeline.admin.jobs import parse_since
from pipeline.api.context import ApiContext
from pipeline.console.render import page
from pipeline.console.session import Sessions, check_csrf
from pipeline.store.access import AuditEntry, AuditFilter, TokenNameTaken

#: Entries one page of the trail shows.
AUDIT_PAGE = 200


def add_routes(app: FastAPI, ctx: ApiContext, sessions: Sessions) -> None:
    @app.get("/tokens", include_in_schema=False)
    def tokens(request: Request) -> Response:
        session = sessions.current(request)
        session.require_operator()
        return page("tokens.html", session=session, tokens=ctx.store.tokens.list_all())

    @app.post("/tokens", include_in_schema=False)
    async def create_token(request: Request) -> Response:
        session = sessions.current(request)
        form = {k: str(v) for k, v in (await request.form()).items()}
        check_csrf(session, form.get("csrf"))
        session.require_operator()
        try:
            issued = await run_in_threadpool(
                issue_token,
                ctx.store,
                ctx.settings,
                form.get("name", "").strip(),
                role=form.get("role", ""),  # type: ignore[arg-type]  # issue_token checks it
                tenant=form.get("tenant", "").strip() or None,
                expires=form.get("expires", "").strip() or None,
                created_by=session.caller.name,
            )
        except (TokenNameTaken, ValueError) as exc:
            listed = ctx.store.tokens.list_all()
            return page(
                "tokens.html", status_code=422, session=session, tokens=listed, problem=str(exc)
            )
        listed = ctx.store.tokens.list_all()
        return page("tokens.html", session=session, tokens=listed, made=issued)

    @app.post("/tokens/{name}/revoke", include_in_schema=False)
    async def revoke_token(request: Request, name: str) -> Response:
        session = sessions.current(request)
        check_csrf(session, str((await request.form()).get("csrf", "")))
        session.require_operator()
        await run_in_threadpool(ctx.store.tokens.revoke, name)
        return RedirectResponse("/console/tokens", status_code=303)

    @app.get("/audit", include_in_schema=False)
    def audit(request: Request, since: str = "", actor: str = "", action: str = "") -> Response:
        session = sessions.current(request)
        session.require_operator()
        problem = ""
        try:
            moment = parse_since(since.strip()) if since.strip() else None
        except ValueError as exc:
            moment, problem = None, str(exc)
        filters = AuditFilter(
            since=moment,
            actor=actor.strip() or None,
            action=action.strip() or None,
            limit=AUDIT_PAGE,
        )
        entries: list[AuditEntry] = []
        if not problem:
            try:
                entries = ctx.store.audit.list(filters)
            except InvalidArgument as exc:  # a NUL byte, which PostgreSQL's text cannot hold
                problem = exc.message
        return page(
            "audit.html",
            session=session,
            entries=entries,
            asked={"since": since, "actor": actor, "action": action},
            problem=problem,
        )
