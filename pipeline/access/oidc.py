"""Bearer JWTs of an OpenID Connect issuer: discovered, their keys cached, checked by joserfc.

The issuer's discovery document (``<issuer>/.well-known/openid-configuration``, whose
``issuer`` must be the one configured) names its JWKS; both are fetched with httpx and kept
(the keys ``DOCLANE_OIDC_JWKS_CACHE_S``). A token whose ``kid`` is not among the kept keys
fetches them again at once (an issuer rotated its keys: no restart), at most once a minute, so
a flood of made-up ``kid``\\s cannot turn into a flood of requests to the issuer.

A token is checked in this order, each refusal E124 (401) with its reason in ``detail.reason``:
its header's ``alg`` among DOCLANE_OIDC_ALGORITHMS (never ``none``, never an HMAC one, so a
token "signed" with the issuer's public key as an HMAC secret is refused before any key is
looked at: ``alg_refused``), its ``kid`` among the issuer's keys (``unknown_kid``), the
signature (``bad_signature``: a payload changed after signing), then the claims: ``exp``
(``expired``), ``nbf`` and ``iat`` (``not_yet_valid``), ``iss`` (``wrong_issuer``), ``aud``
(``wrong_audience``), ``sub`` (``no_subject``), each time claim within DOCLANE_OIDC_LEEWAY_S.

Who it is: ``sub``, with the issuer. Its role: the highest of the roles its roles claim names,
directly (read, submit, admin) or through DOCLANE_OIDC_ROLE_MAP; none is 403 (E109). Its
tenant: the tenant claim (absent: every tenant), which must name a tenant that exists (E116);
an empty one is refused (E124, ``empty_tenant``), never read as every tenant.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jws, jwt
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    ExpiredTokenError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from errors import BearerTokenRefused, RoleForbidden, UnknownTenant
from pipeline.jobs.tenants import EVERY_TENANT, TenantScope
from pipeline.settings.access import AccessSettings
from pipeline.settings.api import ROLES, Role

#: The soonest an unknown ``kid`` fetches the issuer's keys again, in seconds.
REFETCH_MIN_S = 60.0
_HTTP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Identity:
    """Whom a valid token names: its subject at its issuer, its role and whose jobs it sees."""

    subject: str
    issuer: str
    role: Role
    scope: TenantScope


def looks_like_jwt(token: str) -> bool:
    """A compact JWS: three base64url parts (stored and generated tokens have no dots)."""
    return token.count(".") == 2


class OidcIssuer:
    """One issuer's discovery and keys, kept across requests; :meth:`verify` checks a token."""

    def __init__(
        self,
        settings: AccessSettings,
        *,
        tenant_exists: Callable[[str], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.issuer = settings.oidc_issuer.rstrip("/")
        self._tenant_exists = tenant_exists
        self._clock = clock
        self._lock = threading.Lock()
        self._discovery: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._keys_at = -1e18
        self._refetched_at = -1e18

    # ---- discovery and keys -------------------------------------------------------------
    def discovery(self) -> Mapping[str, Any]:
        """The issuer's discovery document (fetched once; its ``issuer`` checked)."""
        with self._lock:
            if self._discovery is None:
                url = f"{self.issuer}/.well-known/openid-configuration"
                document = _get_json(url)
                if str(document.get("issuer", "")).rstrip("/") != self.issuer:
                    raise BearerTokenRefused(
                        f"the discovery document at {url} names the issuer "
                        f"{document.get('issuer')!r}, not {self.issuer!r}",
                        detail={"reason": "discovery_mismatch"},
                    )
                self._discovery = document
            return self._discovery

    def _key_set(self, *, kid: str | None) -> KeySet:
        document = self.discovery()
        now = time.monotonic()
        with self._lock:  # one fetch at a time; the others then find its keys
            stale = now - self._keys_at > self.settings.oidc_jwks_cache_s
            missing = self._keys is not None and kid is not None and not _has_kid(self._keys, kid)
            if missing and now - self._refetched_at < REFETCH_MIN_S:
                missing = False  # fetched again a moment ago: this kid is not the issuer's
            if self._keys is None or stale or missing:
                if missing:
                    self._refetched_at = now
                jwks = _get_json(str(document["jwks_uri"]))
                self._keys, self._keys_at = KeySet.import_key_set(jwks), now  # type: ignore[arg-type]
            return self._keys

    # ---- a token ------------------------------------------------------------------------
    def verify(
        self, token: str, *, audience: str | None = None, nonce: str | None = None
    ) -> Identity:
        """Whom ``token`` names, for ``audience`` (the API's by default; the console's client
        for an ID token, whose ``nonce`` must then be the one sent)."""
        header = _header(token)
        alg = str(header.get("alg", ""))
        if alg not in self.settings.oidc_algorithms:
            raise _refused("alg_refused", f"the algorithm {alg or '(none)'!r} is not accepted")
        kid = header.get("kid")
        keys = self._key_set(kid=str(kid) if kid is not None else None)
        if kid is not None and not _has_kid(keys, str(kid)):
            raise _refused("unknown_kid", f"the issuer has no key {kid!r}")
        try:
            decoded = jwt.decode(token, keys, algorithms=list(self.settings.oidc_algorithms))
        except BadSignatureError as exc:
            raise _refused("bad_signature", "the signature is not the issuer's") from exc
        except JoseError as exc:
            raise _refused("malformed", f"not a token the API can read ({exc.error})") from exc
        claims = dict(decoded.claims)
        self._check_claims(claims, audience or self.settings.oidc_audience)
        if nonce is not None and not _same(claims.get("nonce"), nonce):
            raise _refused("wrong_nonce", "the ID token's nonce is not the one sent")
        return Identity(
            subject=str(claims["sub"]),
            issuer=self.issuer,
            role=self._role(claims),
            scope=self._scope(claims),
        )

    def _check_claims(self, claims: dict[str, Any], audience: str) -> None:
        registry = jwt.JWTClaimsRegistry(
            now=int(self._clock()),
            leeway=self.settings.oidc_leeway_s,
            iss={"essential": True, "value": self.settings.oidc_issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError as exc:
            raise _refused("expired", "the token has expired") from exc
        except MissingClaimError as exc:
            raise _refused(f"no_{_claim_reason(exc)}", str(exc.description)) from exc
        except ClaimError as exc:
            reason = {
                "nbf": "not_yet_valid",
                "iat": "not_yet_valid",
                "iss": "wrong_issuer",
                "aud": "wrong_audience",
            }.get(exc.claim, f"bad_{_claim_reason(exc)}")
            raise _refused(reason, str(exc.description)) from exc
        iat = claims.get("iat")
        if isinstance(iat, int | float) and iat > self._clock() + self.settings.oidc_leeway_s:
            raise _refused("not_yet_valid", "the token was issued in the future")

    def _role(self, claims: Mapping[str, Any]) -> Role:
        given = claims.get(self.settings.oidc_roles_claim, [])
        values = given.split() if isinstance(given, str) else list(given or [])
        mapped = {
            self.settings.oidc_role_map.get(str(v), str(v)) for v in values if isinstance(v, str)
        }
        roles = [r for r in ROLES if r in mapped]
        if not roles:
            raise RoleForbidden(
                f"the token of {claims.get('sub')!r} names no role of doclane's in its "
                f"{self.settings.oidc_roles_claim!r} claim",
                detail={"token": str(claims.get("sub")), "role": None, "needs": "read"},
            )
        return roles[-1]

    def _scope(self, claims: Mapping[str, Any]) -> TenantScope:
        name = self.settings.oidc_tenant_claim
        tenant = claims.get(name)
        if tenant is None:
            return EVERY_TENANT
        if tenant == "":  # an issuer's blank for "no tenant" must not open every tenant's jobs
            raise _refused("empty_tenant", f"its {name!r} claim is empty (leave it out for none)")
        if not isinstance(tenant, str) or not self._tenant_exists(tenant):
            raise UnknownTenant(
                f"the token's {self.settings.oidc_tenant_claim!r} claim names the tenant "
                f"{tenant!r}, which does not exist",
                detail={"tenant": str(tenant)},
            )
        return TenantScope(tenant)


def _refused(reason: str, message: str) -> BearerTokenRefused:
    return BearerTokenRefused(f"bearer token refused: {message}", detail={"reason": reason})


def _same(given: object, sent: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), sent.encode())


def _claim_reason(exc: ClaimError) -> str:
    return "".join(c if c.isalnum() else "_" for c in exc.claim)


def _header(token: str) -> dict[str, Any]:
    try:
        return dict(jws.extract_compact(token.encode()).protected)
    except (JoseError, ValueError) as exc:
        raise _refused("malformed", "not a compact JWT") from exc


def _has_kid(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)


def _get_json(url: str) -> dict[str, Any]:
    try:
        answer = httpx.get(url, timeout=_HTTP_TIMEOUT_S, follow_redirects=False)
        answer.raise_for_status()
        document = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise BearerTokenRefused(
            f"the issuer's {url} could not be read: {exc}", detail={"reason": "issuer_unreachable"}
        ) from exc
    if not isinstance(document, dict):
        raise BearerTokenRefused(
            f"{url} is not a JSON object", detail={"reason": "issuer_unreachable"}
        )
    return document
