"""Single sign-on against a real OpenID provider (oidc-provider on Node 22), over real HTTP.

The provider issues the access tokens (client credentials, JWTs for the API's audience, with
roles and tenant claims); the refusals are tokens the provider never issued, signed here with
its very key (or another) and each made wrong in one way: each is 401 E124 with its reason (or
E116 for a tenant that does not exist), and the same request with a valid token passes, so each
test fails when the check it covers is removed. Keys rotate without a restart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.fixtures.api_server import ApiServer
from tests.fixtures.oidc_provider import AUDIENCE, OidcProvider

CLIENTS = {
    "ops-robot": {"roles": ["doclane-admins"]},
    "reader": {"roles": ["read"]},
    "team-a-ci": {"roles": ["submit"], "tenant": "team-a"},
    "nobody": {"roles": ["marketing"]},
    "ghost-tenant": {"roles": ["read"], "tenant": "no-such-team"},
}


@pytest.fixture
def provider(make_oidc_provider: Callable[..., OidcProvider]) -> OidcProvider:
    return make_oidc_provider(clients=CLIENTS)


@pytest.fixture
def api(
    make_api_server: Callable[..., ApiServer],
    test_database_env: dict[str, str],
    provider: OidcProvider,
) -> ApiServer:
    return make_api_server(
        test_database_env,
        DOCLANE_OIDC_ISSUER=provider.issuer,
        DOCLANE_OIDC_AUDIENCE=AUDIENCE,
        DOCLANE_OIDC_ROLE_MAP="doclane-admins=admin",
        DOCLANE_OIDC_LEEWAY_S="5",
        # team-a exists: a stored token's tenant is made at its creation, an issuer's is not
        DOCLANE_API_TOKENS=json.dumps(
            [{"name": "a", "role": "read", "token": "team-a-token-0123456789", "tenant": "team-a"}]
        ),
    )


def _refusal(api: ApiServer, token: str) -> tuple[int, str, Any]:
    answer = api.get("/v1/stats", token=token)
    error = answer.json().get("error", {})
    return answer.status_code, error.get("code", ""), (error.get("detail") or {}).get("reason")


def test_the_providers_tokens_are_accepted_with_their_mapped_roles_and_tenant(
    api: ApiServer, provider: OidcProvider
) -> None:
    admin = provider.client_token("ops-robot")
    assert api.get("/v1/stats", token=admin).status_code == 200
    made = api.post("/v1/tokens", token=admin, json={"name": "made-by-sso", "role": "read"})
    assert made.status_code == 201, made.text
    reader = provider.client_token("reader")
    assert api.get("/v1/jobs", token=reader).status_code == 200
    refused = api.post("/v1/jobs/00000000-0000-0000-0000-000000000000/cancel", token=reader)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "E109"
    team = provider.client_token("team-a-ci")
    sent = api.post("/v1/jobs", token=team, json={"sources": ["/nowhere/x.md"]})
    assert sent.json()["error"]["detail"]["tenant"] == "team-a", sent.text
    # Who: the subject (a client's id, for client credentials) with its issuer, in the trail.
    trail = api.get("/v1/audit").json()["entries"]
    creator = next(e for e in trail if e["action"] == "create_token")
    assert (creator["actor"], creator["issuer"]) == ("ops-robot", provider.issuer)


def test_a_valid_token_that_maps_to_no_role_is_403(api: ApiServer, provider: OidcProvider) -> None:
    answer = api.get("/v1/stats", token=provider.client_token("nobody"))
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "E109"


def test_a_tenant_claim_naming_an_unknown_tenant_is_refused(
    api: ApiServer, provider: OidcProvider
) -> None:
    status, code, _ = _refusal(api, provider.client_token("ghost-tenant"))
    assert code == "E116" and status >= 400
    assert _refusal(api, provider.sign(provider.claims(tenant="team-a")))[0] == 200
    # an empty claim is no way to say every tenant: the admin role it carries opens nothing
    assert _refusal(api, provider.sign(provider.claims(tenant=""))) == (401, "E124", "empty_tenant")


def test_a_forged_token_with_the_providers_key_and_valid_claims_passes(
    api: ApiServer, provider: OidcProvider
) -> None:
    """The control for every refusal below: the same signing, nothing wrong, 200."""
    assert _refusal(api, provider.sign(provider.claims()))[0] == 200


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"exp": -60}, "expired"),
        ({"nbf": 600}, "not_yet_valid"),
        ({"iat": 600}, "not_yet_valid"),
        ({"iss": "http://127.0.0.1:1/elsewhere"}, "wrong_issuer"),
        ({"aud": "urn:someone-else"}, "wrong_audience"),
    ],
)
def test_claims_out_of_bounds_are_refused(
    api: ApiServer, provider: OidcProvider, change: dict[str, Any], reason: str
) -> None:
    """Times are offsets from now, taken when the test runs: read at collection, a suite that
    reached this test ten minutes later signed a valid ``nbf``."""
    now = int(time.time())
    claims = {k: now + v if k in ("exp", "nbf", "iat") else v for k, v in change.items()}
    assert _refusal(api, provider.sign(provider.claims(**claims))) == (401, "E124", reason)


def test_alg_none_is_refused(api: ApiServer, provider: OidcProvider) -> None:
    head = _b64(json.dumps({"alg": "none", "kid": provider.key.kid}).encode())
    body = _b64(json.dumps(provider.claims()).encode())
    assert _refusal(api, f"{head}.{body}.") == (401, "E124", "alg_refused")


def test_an_hmac_token_signed_with_the_public_key_is_refused(
    api: ApiServer, provider: OidcProvider
) -> None:
    """The classic confusion: HS256 with the issuer's public key (which anyone can read from its
    JWKS) as the shared secret. Signed by hand: joserfc itself refuses to make such a key."""
    public_pem = provider.key.as_pem(private=False)
    head = _b64(json.dumps({"alg": "HS256", "kid": provider.key.kid}).encode())
    body = _b64(json.dumps(provider.claims()).encode())
    mac = hmac.new(public_pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    assert _refusal(api, f"{head}.{body}.{_b64(mac)}") == (401, "E124", "alg_refused")


def test_an_unknown_kid_is_refused(api: ApiServer, provider: OidcProvider) -> None:
    stranger = RSAKey.generate_key(2048, parameters={"kid": "not-the-providers"})
    token = jwt.encode({"alg": "RS256", "kid": "not-the-providers"}, provider.claims(), stranger)
    assert _refusal(api, token) == (401, "E124", "unknown_kid")


def test_a_tampered_payload_is_refused(api: ApiServer, provider: OidcProvider) -> None:
    head, _, signature = provider.sign(provider.claims(roles=["read"])).split(".")
    promoted = _b64(json.dumps(provider.claims(roles=["admin"])).encode())
    assert _refusal(api, f"{head}.{promoted}.{signature}") == (401, "E124", "bad_signature")


def test_a_key_signed_by_another_with_the_providers_kid_is_a_bad_signature(
    api: ApiServer, provider: OidcProvider
) -> None:
    stranger = RSAKey.generate_key(2048)
    token = jwt.encode({"alg": "RS256", "kid": provider.key.kid}, provider.claims(), stranger)
    assert _refusal(api, token) == (401, "E124", "bad_signature")


def test_the_issuers_new_key_is_fetched_without_a_restart(
    api: ApiServer, provider: OidcProvider, make_oidc_provider: Callable[..., OidcProvider]
) -> None:
    assert _refusal(api, provider.sign(provider.claims()))[0] == 200  # its keys, kept
    port = int(provider.issuer.rsplit(":", 1)[1])
    provider.stop()
    rotated = make_oidc_provider(clients=CLIENTS, port=port, kid="k2")
    assert rotated.issuer == provider.issuer and rotated.key.kid == "k2"
    assert api.get("/v1/stats", token=rotated.client_token("ops-robot")).status_code == 200


def test_the_environments_tokens_keep_working_beside_sso(api: ApiServer) -> None:
    assert api.get("/v1/stats").status_code == 200
    assert api.get("/v1/stats", token="team-a-token-0123456789").status_code == 200


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
