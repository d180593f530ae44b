"""The console's single sign-on in a real headless Chromium, against a real OpenID provider
(oidc-provider on Node 22, its own login and consent pages) and a real ``doclane api``:
authorization code with PKCE, the state and the nonce checked, the session cookie of the token
form, sign-out; and the admin's access pages (tokens, audit) reached through it."""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.fixtures.api_server import ApiServer
from tests.fixtures.oidc_provider import AUDIENCE, OidcProvider

WAIT_MS = 30_000
CONSOLE_CLIENT = "doclane-console"


@pytest.fixture
def sso(
    make_oidc_provider: Callable[..., OidcProvider],
    make_api_server: Callable[..., ApiServer],
    test_database_env: dict[str, str],
) -> tuple[OidcProvider, ApiServer]:
    """A provider with a public console client (PKCE, no secret) whose redirect URI is the API's
    callback: the API starts first (it reads the issuer's discovery at its first use), on the
    issuer's address chosen here, then the provider with the API's callback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    api = make_api_server(
        test_database_env,
        DOCLANE_OIDC_ISSUER=f"http://127.0.0.1:{port}",
        DOCLANE_OIDC_AUDIENCE=AUDIENCE,
        DOCLANE_OIDC_CLIENT_ID=CONSOLE_CLIENT,
    )
    provider = make_oidc_provider(
        port=port,
        accounts={"alice": {"roles": ["admin"]}, "bob": {"roles": ["marketing"]}},
        web_clients=[
            {
                "client_id": CONSOLE_CLIENT,
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "redirect_uris": [f"{api.url}/console/sso/callback"],
            }
        ],
    )
    return provider, api


def _sign_in_at_the_provider(page: object, name: str) -> None:
    """oidc-provider's own pages: a login form (any name), then a consent form."""
    page.fill("input[name=login]", name)  # type: ignore[attr-defined]
    page.fill("input[name=password]", "anything")  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_selector("button[type=submit]", timeout=WAIT_MS)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]


def test_a_person_signs_in_through_the_issuer_and_out_again(
    browser: Browser, sso: tuple[OidcProvider, ApiServer]
) -> None:
    provider, api = sso
    page = browser.new_page(base_url=api.url)
    page.set_default_timeout(WAIT_MS)
    page.goto("/console/audit")
    expect(page.locator("#sso")).to_be_visible()
    page.click("#sso")
    page.wait_for_url(f"{provider.issuer}/**")
    assert "code_challenge_method=S256" in page.url or "/interaction/" in page.url
    _sign_in_at_the_provider(page, "alice")
    page.wait_for_url(f"{api.url}/console/audit")
    expect(page.locator(".who")).to_contain_text("alice (admin)")
    expect(page.locator("#audit")).to_be_visible()
    # Through the session, an admin's change: a token made on the Tokens page, its secret once.
    page.goto("/console/tokens")
    page.fill("input[name=name]", "made-in-console")
    page.click(".make-token button[type=submit]")
    secret = page.locator("#secret").inner_text()
    assert httpx.get(
        f"{api.url}/v1/stats", headers={"Authorization": f"Bearer {secret}"}
    ).is_success
    page.goto("/console/audit")
    made = page.locator("tr[data-action=create_token]")
    expect(made).to_contain_text("alice")
    expect(made).to_contain_text(provider.issuer)
    # Sign out: the session is gone.
    page.click(".logout button")
    page.wait_for_url(f"{api.url}/console/login")
    page.goto("/console/jobs")
    page.wait_for_url(f"{api.url}/console/login**")


def test_a_person_with_no_role_of_doclanes_is_not_signed_in(
    browser: Browser, sso: tuple[OidcProvider, ApiServer]
) -> None:
    _, api = sso
    page = browser.new_page(base_url=api.url)
    page.set_default_timeout(WAIT_MS)
    page.goto("/console/login")
    page.click("#sso")
    _sign_in_at_the_provider(page, "bob")
    expect(page.locator("body")).to_contain_text("E109")
    page.goto("/console/jobs")
    page.wait_for_url(f"{api.url}/console/login**")


def test_a_callback_with_another_state_is_refused(sso: tuple[OidcProvider, ApiServer]) -> None:
    _, api = sso
    with httpx.Client(base_url=api.url, follow_redirects=False) as browser:
        started = browser.get("/console/sso", params={"next": "/console/jobs"})
        assert started.status_code == 303 and "code_challenge=" in started.headers["location"]
        assert "nonce=" in started.headers["location"]
        forged = browser.get("/console/sso/callback", params={"code": "x", "state": "not-it"})
        assert forged.status_code == 401 and "state" in forged.text
        assert "doclane_console=" not in forged.headers.get("set-cookie", "")
