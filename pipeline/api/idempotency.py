"""``Idempotency-Key`` on ``POST /v1/jobs``: a submission retried after a timeout is not made twice.

The first request with a key takes it (``idempotency_keys``, per caller, in one transaction:
of two at once, one takes it); once it is answered with 202 its answer is kept, and the same key
from the same caller within a day is answered the same again (with ``Idempotent-Replayed:
true``), nothing submitted. The same key with another body is refused (422, E123); while the
first is still running, 409 ``idempotency_in_progress`` (the client asks again shortly). A
first request that is not accepted (a refusal, a quota's 429, a failure) gives the key back, so
that the client's retry is a submission of its own.

A JSON body is matched by its SHA-256; an upload (streamed to disk as it arrives, never held)
by its content type's kind and length.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from errors import IdempotencyKeyReused
from pipeline.api.audit_trail import note_detail
from pipeline.api.auth import Caller
from pipeline.api.errors import error_response
from pipeline.store.access import IDEMPOTENCY_KEEP_S
from pipeline.store.store import JobStore

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
KEY_MAX = 255


async def idempotent(
    request: Request,
    store: JobStore,
    caller: Caller,
    kind: str,
    submit: Callable[[], Awaitable[Response]],
) -> Response:
    """``submit()``'s answer, or, for a key seen before, the first answer (or its refusal)."""
    key = request.headers.get(HEADER, "").strip()
    if not key:
        return await submit()
    if len(key) > KEY_MAX:
        return error_response(
            400, "bad_request", "malformed request", f"an {HEADER} is 1-{KEY_MAX} characters"
        )
    who = f"{caller.issuer} {caller.name}" if caller.issuer else caller.name
    if kind == "application/json":
        body = hashlib.sha256(await request.body()).digest()
    else:
        shape = f"{kind} {request.headers.get('content-length', '')}"
        body = hashlib.sha256(shape.encode()).digest()
    found = await run_in_threadpool(
        store.idempotency.take, who, key, body, keep_s=IDEMPOTENCY_KEEP_S
    )
    note_detail(request, {"idempotency_key": key})
    if not found.first:
        if found.body != body:
            raise IdempotencyKeyReused(
                f"the {HEADER} {key!r} came with another submission before",
                detail={"key": key},
            )
        if found.answer is None or found.status is None:
            return error_response(
                409,
                "idempotency_in_progress",
                "the first request with this key is still running",
                f"the submission with {HEADER} {key!r} has not answered yet",
                "Ask again in a second.",
            )
        note_detail(request, {"replayed": True})
        return JSONResponse(
            dict(found.answer), status_code=found.status, headers={REPLAYED: "true"}
        )
    try:
        answer = await submit()
    except BaseException:
        await run_in_threadpool(store.idempotency.release, who, key)
        raise
    if answer.status_code == 202 and isinstance(answer, JSONResponse):
        kept = json.loads(bytes(answer.body))
        await run_in_threadpool(store.idempotency.answer, who, key, 202, kept)
    else:
        await run_in_threadpool(store.idempotency.release, who, key)
    return answer
