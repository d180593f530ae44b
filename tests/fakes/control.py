"""The control API tests use to steer a running fake: ``/_control/...`` on the server's origin.

``POST /_control/configure`` (JSON object of knobs, partial), ``POST /_control/reset``,
``GET /_control/knobs``, ``GET /_control/stats``, ``POST /_control/forget-sessions``,
``POST /_control/evict``, ``GET /_control/health``. Errors are HTTP 400 with ``{"error": ...}``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message

from tests.fakes.knobs import Knobs
from tests.fakes.state import FakeState


async def _delete_session(request: Request, session_id: str) -> int:
    """DELETE one session through the MCP app itself, exactly as a client would end it."""
    app = request.app
    host = request.headers.get("host", "127.0.0.1").encode("latin-1")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "DELETE",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", host), (b"mcp-session-id", session_id.encode("latin-1")),
                    (b"accept", b"application/json, text/event-stream")],
        "client": ("127.0.0.1", 0),
        "server": request.scope.get("server"),
        "state": {},
    }  # fmt: skip
    status = 0

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def control_routes(state: FakeState, apply_session_knobs: Callable[[Knobs], None]) -> list[Route]:
    """Routes bound to ``state``; ``apply_session_knobs`` pushes session-scoped knobs to the SDK."""

    async def configure(request: Request) -> JSONResponse:
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("the body must be a JSON object of knobs")
            knobs = state.configure(changes)
        except (ValueError, ValidationError) as exc:
            return JSONResponse({"error": str(exc), "knobs": sorted(Knobs.model_fields)}, 400)
        apply_session_knobs(knobs)
        return JSONResponse(knobs.model_dump())

    async def reset(request: Request) -> JSONResponse:
        state.reset()
        apply_session_knobs(state.knobs)
        return JSONResponse(state.knobs.model_dump())

    async def knobs(request: Request) -> JSONResponse:
        return JSONResponse(state.knobs.model_dump())

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(state.stats.to_json(state.cache))

    async def forget_sessions(request: Request) -> JSONResponse:
        forgotten = 0
        for session_id in list(state.sessions):
            if await _delete_session(request, session_id) == 200:
                forgotten += 1
        state.sessions.clear()
        state.release_hanging()
        return JSONResponse({"forgotten": forgotten})

    async def evict(request: Request) -> JSONResponse:
        return JSONResponse({"evicted": state.cache.clear()})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "profile": state.profile, "pid": os.getpid()})

    return [
        Route("/_control/configure", configure, methods=["POST"]),
        Route("/_control/reset", reset, methods=["POST"]),
        Route("/_control/knobs", knobs, methods=["GET"]),
        Route("/_control/stats", stats, methods=["GET"]),
        Route("/_control/forget-sessions", forget_sessions, methods=["POST"]),
        Route("/_control/evict", evict, methods=["POST"]),
        Route("/_control/health", health, methods=["GET"]),
    ]
