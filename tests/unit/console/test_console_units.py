"""The console's parts that need no service: sessions and CSRF, the list's filters and cursor,
where a sign-in may lead, and what is left of a hostile document's markdown."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import pytest
from fastapi import Response
from starlette.requests import Request

from errors import RoleForbidden, SignInThrottled
from pipeline.api.auth import Caller, TokenRoles
from pipeline.console.app import _local
from pipeline.console.listing import PAGE_SIZE, BadFilter, ListQuery
from pipeline.console.render import markdown_html
from pipeline.console.session import (
    COOKIE,
    CsrfRefused,
    Sessions,
    SignInRequired,
    check_csrf,
    token_accepted,
)
from pipeline.console.throttle import SignInThrottle
from pipeline.jobs.model import JobState
from pipeline.jobs.tenants import EVERY_TENANT
from pipeline.settings.tree import read_settings


def _ctx(token: str | None, tokens: str = "") -> SimpleNamespace:
    overrides = {"api_tokens": tokens} if tokens else {}
    settings = read_settings(api=dict(api_token=token, **overrides)).api
    guard = TokenRoles(settings.tokens())
    return SimpleNamespace(settings=settings, store=SimpleNamespace(tokens=None), guard=guard)


def _request(cookie: str | None = None) -> Request:
    headers = [(b"cookie", f"{COOKIE}={cookie}".encode())] if cookie else []
    scope = {"type": "http", "scheme": "http", "headers": headers, "method": "GET", "path": "/"}
    return Request(scope)


def _cookie_of(response: Response) -> str:
    header = response.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=strict" in header and "Path=/console" in header
    return header.split(";")[0].split("=", 1)[1]


def test_the_sign_in_check_is_the_apis_token_check_with_its_roles() -> None:
    ctx = _ctx("s3cret", tokens="ci:submit:c1-token,grafana:read:gr-token")
    assert token_accepted(ctx, "s3cret") == Caller("DOCLANE_API_TOKEN", "admin", EVERY_TENANT)
    assert token_accepted(ctx, "c1-token") == Caller("ci", "submit", EVERY_TENANT)
    assert token_accepted(ctx, "gr-token") == Caller("grafana", "read", EVERY_TENANT)
    for wrong in ("s3cret ", "", "ci", "submit"):
        assert token_accepted(ctx, wrong) is None
    assert token_accepted(_ctx(None), "") is None  # no token set: nobody signs in


def test_a_session_holds_its_role_and_csrf_token_and_nothing_else_passes() -> None:
    ctx = _ctx("s3cret", tokens="grafana:read:gr-token")
    sessions = Sessions(ctx)
    response = Response()
    started = sessions.start(_request(), response, Caller("grafana", "read", EVERY_TENANT))
    cookie = _cookie_of(response)
    assert "gr-token" not in cookie and "s3cret" not in cookie
    assert sessions.current(_request(cookie)) == started
    started.require("read")
    for more in ("submit", "admin"):
        with pytest.raises(RoleForbidden):
            started.require(more)  # type: ignore[arg-type]
    check_csrf(started, started.csrf)
    for wrong in (None, "", started.csrf[:-1]):
        with pytest.raises(CsrfRefused):
            check_csrf(started, wrong)
    for bad in (None, cookie[:-2] + "xx", "garbage"):
        with pytest.raises(SignInRequired):
            sessions.current(_request(bad))
    # another token or role (rotated, or another deployment's) makes every old cookie worthless
    for changed in (_ctx("other", tokens="grafana:read:gr-token"), _ctx("s3cret"), _ctx(None)):
        with pytest.raises(SignInRequired):
            Sessions(changed).current(_request(cookie))
    with pytest.raises(SignInRequired):
        Sessions(_ctx("s3cret", tokens="grafana:admin:gr-token")).current(_request(cookie))


def test_a_sign_in_leads_only_into_the_console() -> None:
    assert _local("/console/jobs?state=failed") == "/console/jobs?state=failed"
    for elsewhere in ("https://evil.test/", "//evil.test/console/", "/console//evil.test", ""):
        assert _local(elsewhere) == "/console/jobs"


def test_the_list_filters_as_typed_and_as_the_store_takes_them() -> None:
    asked = ListQuery(state="failed", error_code="E303", queue="doclane.small", since="1h")
    filters = asked.to_filter()
    assert filters.state is JobState.FAILED and filters.error_code == "E303"
    assert filters.queue == "doclane.small" and filters.since is not None
    assert filters.limit == PAGE_SIZE and filters.before is None
    for wrong in (ListQuery(state="done"), ListQuery(error_code="303"), ListQuery(since="soon")):
        with pytest.raises(BadFilter):
            wrong.to_filter()
    with pytest.raises(BadFilter, match="damaged"):
        ListQuery(before="yesterday~nobody").to_filter()


def test_the_next_page_link_carries_the_last_rows_keyset() -> None:
    at = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
    last = SimpleNamespace(created_at=at, id=UUID(int=7))
    asked = ListQuery(state="failed")
    assert asked.next_page([last] * (PAGE_SIZE - 1)) is None
    link = asked.next_page([last] * PAGE_SIZE)
    assert link is not None and link.startswith("/console/jobs?state=failed&before=")
    before = parse_qs(urlsplit(link).query)["before"][0]
    assert ListQuery(before=before).to_filter().before == (at, UUID(int=7))


def test_a_documents_markdown_keeps_its_text_and_loses_its_scripts() -> None:
    html = markdown_html(
        "# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n"
        "[js](javascript:alert(3)) [data](data:text/html,<b>x</b>) [ok](https://example.test)\n\n"
        "![pic](data:image/png;base64,iVBORw0KGgo=)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    assert "<h1>Title</h1>" in html and "<td>1</td>" in html
    assert "<script" not in html and "onerror" not in html and "javascript:" not in html
    assert 'href="data:' not in html and 'src="data:image/png;base64,' in html
    assert 'href="https://example.test"' in html


class _Clock:
    """Time as the test sets it: the window's end is reached without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_sign_in_throttle_refuses_past_the_limit_until_the_oldest_failure_leaves() -> None:
    clock = _Clock()
    throttle = SignInThrottle(3, 60, clock=clock)
    for _ in range(3):
        throttle.check("203.0.113.7")
        throttle.failed("203.0.113.7")
        clock.now += 10
    with pytest.raises(SignInThrottled) as refused:
        throttle.check("203.0.113.7")
    assert refused.value.code == "E114" and refused.value.retry_after == 30
    throttle.check("198.51.100.9")  # another address is not concerned
    clock.now += 30  # the first failure leaves the window: one more try
    throttle.check("203.0.113.7")
    throttle.failed("203.0.113.7")
    with pytest.raises(SignInThrottled):
        throttle.check("203.0.113.7")


def test_the_sign_in_throttle_forgets_the_address_whose_last_failure_is_oldest() -> None:
    throttle = SignInThrottle(1, 60, max_addresses=2, clock=_Clock())
    for address in ("a", "b", "a", "c"):  # "b" failed last longest ago when "c" came
        throttle.failed(address)
    throttle.check("b")
    for address in ("a", "c"):
        with pytest.raises(SignInThrottled):
            throttle.check(address)
