"""Several tool calls at once, with answers in request order and no raise for partial failure.

Sequential by default (some tools depend on each other's effects, and a sequence is easier to
read in a log); parallel on request, on threads sharing the one client, each call matched to
its response by its JSON-RPC id. Every call gets an outcome: its result (which may be an
``isError`` result: tool errors are results) or the catalog error that stopped it. A batch
timeout bounds the whole batch: each call gets at most what is left of it, and a call that
could not start before it ran out is a timeout outcome.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from errors import CallTimeout, PipelineError, classify
from pipeline.mcp.protocol import ToolResult


@dataclass(frozen=True)
class ToolCall:
    """One call of a batch. ``call_id`` lets the caller tie outcomes to its own records."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    size_bytes: int | None = None
    timeout: float | None = None
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class CallOutcome:
    """What became of one call: a ``result`` or an ``error``, never both."""

    call: ToolCall
    result: ToolResult | None = None
    error: PipelineError | None = None
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """A result that is not a tool error."""
        return self.result is not None and not self.result.is_error

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "call_id": self.call.call_id,
            "tool": self.call.name,
            "ok": self.ok,
            "duration_s": round(self.duration, 6),
        }
        if self.result is not None:
            out["result"] = self.result.to_dict()
        if self.error is not None:
            out["error"] = self.error.to_dict()
        return out


#: Calls one tool; the float is a cap on its timeout (what is left of the batch), or None.
CallOne = Callable[[ToolCall, float | None], ToolResult]


def run_batch(
    call_one: CallOne,
    calls: Sequence[ToolCall],
    *,
    parallel: bool = False,
    timeout: float | None = None,
    max_workers: int = 4,
) -> list[CallOutcome]:
    deadline = None if timeout is None else time.monotonic() + timeout

    def run(call: ToolCall) -> CallOutcome:
        started = time.monotonic()
        cap = None if deadline is None else deadline - started
        if cap is not None and cap <= 0:
            error = CallTimeout(f"{call.name}: the batch's {timeout:g}s ran out before it started")
            return CallOutcome(call, error=error)
        try:
            result = call_one(call, cap)
        except Exception as exc:
            return CallOutcome(call, error=classify(exc), duration=time.monotonic() - started)
        return CallOutcome(call, result=result, duration=time.monotonic() - started)

    if not parallel or len(calls) <= 1:
        return [run(call) for call in calls]
    with ThreadPoolExecutor(
        max_workers=min(max_workers, len(calls)), thread_name_prefix="mcp-batch"
    ) as pool:
        return list(pool.map(run, calls))
