"""Multi-round-trip results of the 2026-07-28 revision: a call the server cannot finish alone.

A stateless server that needs something from the client in the middle of a tool call
(elicitation, sampling, roots) answers ``resultType: "input_required"`` with the
``inputRequests`` it wants answered and, optionally, a ``requestState`` to be echoed. The
client then sends the call again, a new request each time, carrying the answers as
``inputResponses`` and the state exactly as given, until the server answers in full, within the
call's own deadline. doclane, a batch pipeline, has nobody to ask: without an
:data:`InputHandler` such a call is E305.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from errors import CallTimeout, MissingCapability, ParseError, UnexpectedError
from pipeline.mcp.protocol import JsonObject

#: Answers one input request of a 2026-07-28 server: (method, params) -> its result.
InputHandler = Callable[[str, JsonObject], JsonObject]
#: Sends the call again with these params within this many seconds: -> its raw result.
Resend = Callable[[JsonObject, float], JsonObject]

#: Rounds of a multi-round-trip (input_required) result before giving up.
MAX_INPUT_ROUNDS = 10


def complete_input_required(
    raw: JsonObject,
    params: JsonObject,
    *,
    resend: Resend,
    answer: InputHandler | None,
    limit: float,
    started: float,
) -> JsonObject:
    """The call's final result: ``raw`` itself unless it asks for input, else what the rounds
    end with. ``params`` are the call's first; ``limit`` seconds from ``started`` (monotonic)
    bound every round together. A result without ``resultType`` is complete."""
    for _round in range(MAX_INPUT_ROUNDS):
        if raw.get("resultType") != "input_required":
            return raw
        retry: JsonObject = dict(params)
        requests = raw.get("inputRequests")
        if requests:
            retry["inputResponses"] = _answer_inputs(requests, answer)
        state = raw.get("requestState")
        if isinstance(state, str):
            retry["requestState"] = state
        elif not requests:
            raise ParseError("an input_required result with neither input nor state")
        remaining = limit - (time.monotonic() - started)
        if remaining <= 0:
            raise CallTimeout(f"tools/call: no answer within {limit:g}s")
        raw = resend(retry, remaining)
    raise UnexpectedError(f"the server asked for more than {MAX_INPUT_ROUNDS} rounds")


def _answer_inputs(requests: Any, answer: InputHandler | None) -> JsonObject:
    if answer is None or not isinstance(requests, Mapping):
        raise MissingCapability(
            "the server asks the client for input (sampling, elicitation), which doclane, "
            "a batch pipeline, cannot give",
            detail={"input_requests": sorted(requests)[:10] if requests else []},
        )
    answers: JsonObject = {}
    for key, request in requests.items():
        if not isinstance(request, Mapping) or not isinstance(request.get("method"), str):
            raise ParseError(f"malformed input request {key!r}")
        answers[key] = answer(request["method"], request.get("params") or {})
    return answers
