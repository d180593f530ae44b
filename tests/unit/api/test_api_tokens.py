"""DOCLANE_API_TOKENS as pydantic-settings reads it, and the role checks over it."""

from __future__ import annotations

import json

import pytest
from fastapi.security import HTTPAuthorizationCredentials
from starlette.exceptions import HTTPException
from starlette.requests import Request

from errors import InvalidArgument, InvalidSetting, RoleForbidden
from pipeline.api.auth import Caller, TokenRoles
from pipeline.jobs.tenants import EVERY_TENANT, TenantScope, scope_of
from pipeline.settings.api import ApiSettings

SECRET_A, SECRET_B = "a" * 32 + "-secret", "b" * 32 + "-secret"


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]  # no developer's .env
    monkeypatch.delenv("DOCLANE_API_TOKEN", raising=False)
    monkeypatch.delenv("DOCLANE_API_TOKENS", raising=False)


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> ApiSettings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return ApiSettings.from_environment()


def test_tokens_read_as_name_role_token_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = f" ci:submit:{SECRET_A} , grafana:read:{SECRET_B}:with:colons "
    tokens = _settings(monkeypatch, DOCLANE_API_TOKENS=listed).tokens()
    assert [(t.name, t.role, t.token.get_secret_value()) for t in tokens] == [
        ("ci", "submit", SECRET_A),
        ("grafana", "read", f"{SECRET_B}:with:colons"),
    ]
    as_json = json.dumps([{"name": "ops", "role": "admin", "token": SECRET_A}])
    [ops] = _settings(monkeypatch, DOCLANE_API_TOKENS=as_json).tokens()
    assert (ops.name, ops.role) == ("ops", "admin")


def test_the_single_token_is_an_admin_beside_the_listed_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = _settings(
        monkeypatch, DOCLANE_API_TOKEN=SECRET_A, DOCLANE_API_TOKENS=f"ci:read:{SECRET_B}"
    )
    assert [(t.name, t.role) for t in settings.tokens()] == [
        ("DOCLANE_API_TOKEN", "admin"),
        ("ci", "read"),
    ]
    assert _settings(monkeypatch, DOCLANE_API_TOKEN="", DOCLANE_API_TOKENS="").tokens() == ()


@pytest.mark.parametrize(
    "listed",
    [
        f"ci:root:{SECRET_A}",
        f"ci:read:{SECRET_A},ci:admin:{SECRET_B}",
        f"ci:read:{SECRET_A},ops:admin:{SECRET_A}",
        f"ci:read:{SECRET_A},nothing-here",
        f"bad name:read:{SECRET_A}",
    ],
)
def test_a_wrong_token_list_is_refused_without_its_secrets(
    monkeypatch: pytest.MonkeyPatch, listed: str
) -> None:
    with pytest.raises(InvalidSetting) as refused:
        _settings(monkeypatch, DOCLANE_API_TOKENS=listed)
    assert SECRET_A not in str(refused.value) and SECRET_B not in str(refused.value)


def test_secrets_are_not_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(
        monkeypatch, DOCLANE_API_TOKEN=SECRET_B, DOCLANE_API_TOKENS=f"ci:read:{SECRET_A}"
    )
    shown = f"{settings!r} {settings.model_dump()} {settings.tokens()!r}"
    assert SECRET_A not in shown and SECRET_B not in shown


def _bearer(token: str) -> HTTPAuthorizationCredentials:
    return HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)


def test_roles_allow_what_the_roles_before_them_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = f"r:read:{SECRET_A},s:submit:{SECRET_B},a:admin:{SECRET_A}x"
    access = TokenRoles(_settings(monkeypatch, DOCLANE_API_TOKENS=listed).tokens())
    assert access.caller(_bearer(SECRET_B), _request()) == Caller("s", "submit", EVERY_TENANT)
    allowed = {
        (name, role)
        for name, secret in (("r", SECRET_A), ("s", SECRET_B), ("a", SECRET_A + "x"))
        for role in ("read", "submit", "admin")
        if _passes(access, secret, role)
    }
    assert allowed == {
        ("r", "read"), ("s", "read"), ("s", "submit"), ("a", "read"), ("a", "submit"),
        ("a", "admin"),
    }  # fmt: skip
    for wrong in (None, "", SECRET_A[:-1], SECRET_A + "y"):
        with pytest.raises(HTTPException) as refused:
            access.caller(_bearer(wrong) if wrong is not None else None, _request())
        assert refused.value.status_code == 401


def _passes(access: TokenRoles, secret: str, role: str) -> bool:
    check = access.require(role)  # type: ignore[arg-type]
    try:
        check(access.caller(_bearer(secret), _request()))
    except RoleForbidden:
        return False
    return True


def test_a_json_token_may_carry_a_tenant_and_the_caller_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = json.dumps(
        [
            {"name": "team-a", "role": "submit", "token": SECRET_A, "tenant": "team-a"},
            {"name": "ops", "role": "admin", "token": SECRET_B},
        ]
    )
    a, ops = _settings(monkeypatch, DOCLANE_API_TOKENS=listed).tokens()
    assert (a.tenant, ops.tenant) == ("team-a", None)
    check = TokenRoles([a, ops])
    caller = check.caller(
        HTTPAuthorizationCredentials(scheme="Bearer", credentials=SECRET_A), _request()
    )
    assert caller == Caller("team-a", "submit", TenantScope("team-a"))
    assert caller.scope.covers("team-a") and not caller.scope.covers("team-b")
    assert caller.may_change()
    assert Caller("ops", "admin", EVERY_TENANT).scope.covers("team-b")
    # a submit token of no tenant: cancel and retry are an admin's
    assert not Caller("ci", "submit", EVERY_TENANT).may_change()
    assert not Caller("a-read", "read", TenantScope("team-a")).may_change()
    with pytest.raises(RoleForbidden):
        check.changer()(Caller("ci", "submit", EVERY_TENANT))


def test_an_empty_tenant_is_refused_not_read_as_every_tenant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = json.dumps([{"name": "x", "role": "admin", "token": SECRET_A, "tenant": ""}])
    with pytest.raises(InvalidSetting, match=r"tenant.*empty tenant: leave .tenant. out"):
        _settings(monkeypatch, DOCLANE_API_TOKENS=listed)
    with pytest.raises(InvalidArgument, match="an empty tenant name") as refused:
        scope_of("")
    assert refused.value.code == "E117"
    with pytest.raises(InvalidArgument, match="not a tenant name"):
        TenantScope("Team A")
    assert scope_of(None) is EVERY_TENANT and EVERY_TENANT.every
    assert scope_of("team-a") == TenantScope("team-a") and not TenantScope("team-a").every


def test_a_tenant_that_is_no_tenant_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = json.dumps([{"name": "x", "role": "read", "token": SECRET_A, "tenant": "Team A"}])
    with pytest.raises(InvalidSetting, match=r"DOCLANE_API_TOKENS\[0\]\.tenant"):
        _settings(monkeypatch, DOCLANE_API_TOKENS=listed)


def _request() -> Request:
    """A request's scope for the guard to note its caller in."""
    return Request({"type": "http", "method": "GET", "path": "/", "headers": []})
