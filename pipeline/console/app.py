"""The console as an ASGI app of its own, mounted by the API at ``/console``.

Its own app, so its errors are pages (a sign-in form, a 404 page) while the API's stay JSON, and
so it stays out of the API's OpenAPI document. Routes, by module: sign-in (here), jobs and a job
(``pages``), cancel/retry/bulk retry (``actions``), upload and live refresh (``uploading``).
"""

from __future__ import annotations

from importlib.resources import files
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response

from errors import JobNotFound, RoleForbidden, SignInThrottled
from pipeline.admin.jobs import WrongState
from pipeline.api.context import ApiContext
from pipeline.api.errors import catalog_response, install_handlers
from pipeline.console import access_pages, actions, pages, sso, uploading
from pipeline.console.render import SECURITY_HEADERS, page
from pipeline.console.session import (
    CsrfRefused,
    Sessions,
    SignInRequired,
    check_csrf,
    token_accepted,
)
from pipeline.console.throttle import SignInThrottle

_STATIC = {"console.css": "text/css", "console.js": "text/javascript"}


def console_app(ctx: ApiContext) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    sessions = Sessions(ctx)
    install_handlers(app)  # the upload answers as POST /v1/jobs does: the API's JSON errors
    _page_errors(app)
    _sign_in(app, ctx, sessions)
    sso.add_routes(app, ctx, sessions, _local)
    access_pages.add_routes(app, ctx, sessions)
    pages.add_routes(app, ctx, sessions)
    actions.add_routes(app, ctx, sessions)
    uploading.add_routes(app, ctx, sessions)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in _STATIC:
            return Response(status_code=404)
        body = files("pipeline.console").joinpath("static", name).read_bytes()
        return Response(body, media_type=_STATIC[name], headers={"Cache-Control": "max-age=300"})

    return app


def _sign_in(app: FastAPI, ctx: ApiContext, sessions: Sessions) -> None:
    throttle = SignInThrottle(
        ctx.settings.console_signin_failures, ctx.settings.console_signin_window_s
    )
    single_sign_on = sso.enabled(ctx)

    @app.get("/", include_in_schema=False)
    def home() -> Response:
        return RedirectResponse("/console/jobs", status_code=303)

    @app.get("/login", include_in_schema=False)
    def login_form(next: str = "") -> Response:
        return page("login.html", next=_local(next), refused=False, sso=single_sign_on)

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = await request.form()
        token, target = str(form.get("token", "")), _local(str(form.get("next", "")))
        address = request.client.host if request.client else ""
        try:
            throttle.check(address)  # before the token is looked at: no answer to a guess
        except SignInThrottled as exc:
            return _throttled(exc, target)
        caller = token_accepted(ctx, token)
        if caller is None:
            throttle.failed(address)
            return page(
                "login.html", status_code=401, next=target, refused=True, sso=single_sign_on
            )
        response = RedirectResponse(target, status_code=303)
        sessions.start(request, response, caller)
        return response

    @app.post("/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        session = sessions.current(request)
        check_csrf(session, str((await request.form()).get("csrf", "")))
        response = RedirectResponse("/console/login", status_code=303)
        sessions.end(response)
        return response


def _throttled(exc: SignInThrottled, target: str) -> Response:
    """The catalog's refusal (E114) on the sign-in page, with how long to wait."""
    answer = page("login.html", status_code=429, next=target, refused=False, throttled=exc)
    answer.headers["Retry-After"] = str(int(exc.retry_after or 1))
    return answer


def _local(target: str) -> str:
    """Only a path of the console may follow a sign-in (never another site)."""
    if target.startswith("/console/") and not target.startswith("/console//"):
        return target
    return "/console/jobs"


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _page_errors(app: FastAPI) -> None:
    @app.exception_handler(SignInRequired)
    async def _sign_in_first(request: Request, _: SignInRequired) -> Response:
        if _wants_json(request):
            body = {"error": {"code": "unauthorized", "message": "sign in to the console"}}
            return JSONResponse(body, status_code=401, headers=SECURITY_HEADERS)
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/console/login?next={quote(here)}", status_code=303)

    @app.exception_handler(CsrfRefused)
    async def _csrf(_: Request, __: CsrfRefused) -> Response:
        why = "The form came without this session's CSRF token: reload the page and try again."
        return page("problem.html", status_code=403, title="Refused", message=why)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> Response:
        """A page's address that is not one (a job id that is no UUID): said as a page."""
        why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return page("problem.html", status_code=422, title="Not a valid address", message=why)

    @app.exception_handler(RoleForbidden)
    async def _role(request: Request, exc: RoleForbidden) -> Response:
        if _wants_json(request):
            return catalog_response(exc)
        return page(
            "problem.html", status_code=403, title="Not for this token", message=exc.message
        )

    @app.exception_handler(JobNotFound)
    async def _no_job(_: Request, exc: JobNotFound) -> Response:
        return page("problem.html", status_code=404, title="No such job", message=str(exc))

    @app.exception_handler(WrongState)
    async def _wrong_state(_: Request, exc: WrongState) -> Response:
        return page("problem.html", status_code=409, title="Not possible now", message=str(exc))
