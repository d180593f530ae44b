"""The audit trail of the API and the console: every request that may change something, recorded.

An ASGI middleware around the whole app (the console is mounted inside it, and shares the
request's scope): a POST, PUT, PATCH or DELETE whose caller was established (the bearer guard,
or the console's session, put it in the scope's state) is recorded once its answer is sent,
with the route's name as the action (``submit``, ``cancel``, ``retry``, ``retry_failed``,
``create_token``, ``revoke_token``), the job id or token name it names as the target, the
client's address, and the outcome: ``ok`` for a 2xx or 3xx answer, else the error's code
(E108, E109, E115 ...) read from the API's JSON error, or ``http_<status>`` for a page. A
request refused before anyone was known (401) names no one and is not recorded. A handler may
add detail (a submission's job counts) under :data:`AUDIT_DETAIL` in the scope's state.

Never a secret: what is recorded is chosen here, never a request's body or headers.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.access.audit import record
from pipeline.api.auth import CALLER_STATE, Caller
from pipeline.store.access import AuditEntry
from pipeline.store.store import JobStore

#: Where a handler leaves detail for its request's entry (a dictionary of JSON values).
AUDIT_DETAIL = "doclane.audit"
_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Routes that change nothing of the fleet's (a console sign-in is a session, not an action).
_NOT_ACTIONS = frozenset({"login", "logout"})
#: The most of an error's body read for its code.
_ERROR_BODY_MAX = 64 * 1024


def note_detail(request: Request, detail: dict[str, Any]) -> None:
    """Add ``detail`` to the entry of ``request`` (a handler's, e.g. a submission's counts)."""
    request.scope.setdefault("state", {}).setdefault(AUDIT_DETAIL, {}).update(detail)


class AuditTrail:
    """Records the changing requests of ``app`` into ``store``'s trail."""

    def __init__(self, app: ASGIApp, store: JobStore) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _CHANGING:
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})
        seen: dict[str, Any] = {"status": 500, "json": False, "body": b""}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = int(message["status"])
                kinds = [v for k, v in message.get("headers", []) if k.lower() == b"content-type"]
                seen["json"] = any(b"json" in kind for kind in kinds)
            elif (
                message["type"] == "http.response.body"
                and seen["status"] >= 400
                and seen["json"]
                and len(seen["body"]) < _ERROR_BODY_MAX
            ):
                seen["body"] += message.get("body", b"")
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            entry = _entry(scope, seen)
            if entry is not None:
                await run_in_threadpool(record, self.store, entry)


def _entry(scope: Scope, seen: dict[str, Any]) -> AuditEntry | None:
    state = scope.get("state") or {}
    caller = state.get(CALLER_STATE)
    route = scope.get("route")
    name = getattr(route, "name", None)
    if not isinstance(caller, Caller) or not name or name in _NOT_ACTIONS:
        return None
    params = scope.get("path_params") or {}
    target = params.get("job_id", params.get("name"))
    client = scope.get("client")
    detail = dict(state.get(AUDIT_DETAIL) or {})
    if str(scope.get("root_path", "")).endswith("/console"):  # the console's mount
        detail.setdefault("via", "console")
    return AuditEntry(
        actor=caller.name,
        issuer=caller.issuer,
        address=client[0] if client else None,
        action=str(name),
        target=str(target) if target is not None else None,
        outcome=_outcome(seen),
        detail=detail,
    )


def _outcome(seen: dict[str, Any]) -> str:
    status = int(seen["status"])
    if status < 400:
        return "ok"
    if seen["body"]:
        try:
            code = json.loads(seen["body"])["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        if isinstance(code, str) and code:
            return code
    return f"http_{status}"
