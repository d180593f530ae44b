"""The console's sign-in through the OpenID Connect issuer: authorization code with PKCE.

``GET /console/sso`` sends the browser to the issuer's authorization endpoint with a fresh
``state``, ``nonce`` and PKCE verifier (S256), all three kept in a short-lived signed cookie of
their own (``SameSite=Lax``: the issuer's redirect back is a navigation from another site, which
a ``Strict`` cookie would not come with). ``GET /console/sso/callback`` checks the ``state``
(constant time), redeems the code with the verifier at the token endpoint (authlib's client),
checks the ID token as the API checks a bearer JWT (:mod:`pipeline.access.oidc`: its signature,
issuer, times) with the console's client id as its audience and the ``nonce`` it was sent, and
starts the same session cookie the token form starts, as the token's subject with the role and
tenant its claims give. The session's own cookie is ``Strict``, so the callback answers a page
that moves on by itself (a navigation of the console's own) rather than a redirect, which the
browser would count as part of the issuer's cross-site chain.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import httpx
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response
from itsdangerous import BadSignature

from errors import BearerTokenRefused, PipelineError
from pipeline.access.oidc import OidcIssuer
from pipeline.api.auth import Caller
from pipeline.api.context import ApiContext
from pipeline.console.render import page
from pipeline.console.session import ConsoleCookie, Sessions

#: The cookie that carries a sign-in's state, nonce and verifier to the callback.
FLOW_COOKIE = "doclane_console_sso"
#: How long a sign-in at the issuer may take.
FLOW_MAX_AGE_S = 600
#: Lax: the identity provider's redirect to the callback comes from its site, and must bring it.
FLOW = ConsoleCookie(FLOW_COOKIE, "/console/sso", "lax", FLOW_MAX_AGE_S)


def enabled(ctx: ApiContext) -> bool:
    """Whether the console offers the issuer's sign-in (an issuer and the console's client)."""
    return ctx.guard.issuer is not None and bool(ctx.tree.access.oidc_client_id)


def add_routes(
    app: FastAPI, ctx: ApiContext, sessions: Sessions, target_of: Callable[[str], str]
) -> None:
    """The SSO routes, when :func:`enabled`; ``target_of`` keeps a ``next`` in the console."""
    access = ctx.tree.access
    issuer = ctx.guard.issuer
    if issuer is None or not enabled(ctx):
        return
    # Signed with the sessions' key: any API process of the fleet may receive the callback.
    signer = sessions.signer("doclane.console.sso")

    def client(request: Request) -> OAuth2Client:
        secret = access.oidc_client_secret.get_secret_value() if access.oidc_client_secret else None
        return OAuth2Client(
            client_id=access.oidc_client_id,
            client_secret=secret,
            scope=" ".join(access.oidc_scopes),
            redirect_uri=str(request.url_for("sso_callback")),
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            timeout=10,
        )

    @app.get("/sso", include_in_schema=False)
    def sso_start(request: Request, next: str = "") -> Response:
        found = issuer.discovery()
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(48)
        with client(request) as oauth:
            url, _ = oauth.create_authorization_url(
                str(found["authorization_endpoint"]),
                state=state,
                nonce=nonce,
                code_verifier=verifier,
            )
        flow = {"state": state, "nonce": nonce, "verifier": verifier, "next": target_of(next)}
        answer = RedirectResponse(url, status_code=303)
        FLOW.set(request, answer, signer.dumps(flow))
        return answer

    @app.get("/sso/callback", include_in_schema=False, name="sso_callback")
    async def sso_callback(
        request: Request, code: str = "", state: str = "", error: str = ""
    ) -> Response:
        try:
            flow = signer.loads(request.cookies.get(FLOW_COOKIE, ""), max_age=FLOW_MAX_AGE_S)
        except BadSignature:
            return _refused("The sign-in took too long or did not start here: start again.")
        if error:
            return _refused(f"The identity provider refused the sign-in: {error}.")
        if not state or not secrets.compare_digest(state.encode(), str(flow["state"]).encode()):
            return _refused("The sign-in's state does not match the one sent: start again.")
        try:
            caller = await run_in_threadpool(_redeem, issuer, client(request), code, flow)
        except PipelineError as exc:
            return _refused(f"{exc.code}: {exc.message}")
        except (OAuthError, httpx.HTTPError) as exc:
            return _refused(f"The code could not be redeemed at the identity provider: {exc}")
        target = str(flow["next"])
        answer = page("signed_in.html", target=target)
        sessions.start(request, answer, caller)
        FLOW.clear(answer)
        return answer


def _redeem(issuer: OidcIssuer, oauth: OAuth2Client, code: str, flow: dict[str, str]) -> Caller:
    """The code redeemed with the verifier; the ID token checked with the nonce sent."""
    with oauth:
        token = oauth.fetch_token(
            str(issuer.discovery()["token_endpoint"]),
            grant_type="authorization_code",
            code=code,
            code_verifier=flow["verifier"],
        )
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise BearerTokenRefused(
            "the issuer answered no ID token", detail={"reason": "no_id_token"}
        )
    who = issuer.verify(id_token, audience=oauth.client_id, nonce=flow["nonce"])
    return Caller(who.subject, who.role, who.scope, who.issuer)


def _refused(message: str) -> Response:
    return page("problem.html", status_code=401, title="Not signed in", message=message)
