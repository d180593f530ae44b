"""The client's lifecycle as an explicit state machine with a recorded trail.

::

    new ──initialize()──► initializing ──ok──► ready ──HTTP 404──► reinitializing ──ok──► ready
     ▲                        │                  │                    │  ▲
     └──────── failed ────────┘                  │                    └──┘ failed: stays, the
                                                 │                         next call tries again
    any state ──close()──► closed ◄──────────────┘

``reinitializing`` is a state, not only an activity: the server forgot the session and the
client owes it a new handshake before the next request. A failed re-initialize keeps the client
there (recorded in the trail), so a retried call tries again instead of being refused with E301
forever. Every transition is recorded with monotonic and wall-clock time and a reason: when a
worker misbehaves, the trail says when its sessions came and went and why.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from errors import PipelineError


class LifecycleState(StrEnum):
    NEW = "new"
    INITIALIZING = "initializing"
    READY = "ready"
    REINITIALIZING = "reinitializing"
    CLOSED = "closed"


ALLOWED: dict[LifecycleState, frozenset[LifecycleState]] = {
    LifecycleState.NEW: frozenset({LifecycleState.INITIALIZING, LifecycleState.CLOSED}),
    LifecycleState.INITIALIZING: frozenset(
        {LifecycleState.READY, LifecycleState.NEW, LifecycleState.CLOSED}
    ),
    LifecycleState.READY: frozenset({LifecycleState.REINITIALIZING, LifecycleState.CLOSED}),
    LifecycleState.REINITIALIZING: frozenset(
        {LifecycleState.READY, LifecycleState.REINITIALIZING, LifecycleState.CLOSED}
    ),
    LifecycleState.CLOSED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A bug in the client: it tried a transition the state machine does not have."""


@dataclass(frozen=True, slots=True)
class Transition:
    """One recorded step of the lifecycle."""

    from_state: LifecycleState
    to_state: LifecycleState
    monotonic: float
    wall: datetime
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.wall.isoformat(timespec='milliseconds')}  "
            f"{self.from_state.value:>14} -> {self.to_state.value:<14} {self.reason}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": self.from_state.value,
            "to": self.to_state.value,
            "monotonic": round(self.monotonic, 6),
            "at": self.wall.isoformat(),
            "reason": self.reason,
        }


class Lifecycle:
    """The current state and the trail of how it got there; thread-safe."""

    def __init__(self, max_trail: int = 500) -> None:
        self._state = LifecycleState.NEW
        self._trail: deque[Transition] = deque(maxlen=max_trail)
        self._lock = threading.Lock()

    @property
    def state(self) -> LifecycleState:
        return self._state

    @property
    def trail(self) -> list[Transition]:
        with self._lock:
            return list(self._trail)

    def move(self, to_state: LifecycleState, reason: str) -> Transition:
        with self._lock:
            from_state = self._state
            if to_state not in ALLOWED[from_state]:
                raise IllegalTransition(f"{from_state} -> {to_state} ({reason})")
            step = Transition(from_state, to_state, time.monotonic(), datetime.now(UTC), reason)
            self._trail.append(step)
            self._state = to_state
            return step


def format_trail(trail: Iterable[Transition]) -> str:
    """The trail as lines of text, oldest first."""
    return "\n".join(str(step) for step in trail)


def short_session_id(session_id: str | None) -> str:
    """A session id as a reason in the trail names it: enough to tell two apart."""
    if not session_id:
        return "(none)"
    return session_id[:8] + ("..." if len(session_id) > 8 else "")


def describe_failure(exc: BaseException) -> str:
    """A failure as a reason in the trail names it: its code where it has one."""
    if isinstance(exc, PipelineError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
