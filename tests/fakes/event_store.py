"""An in-memory EventStore that makes a dropped SSE stream reliably resumable.

The SDK's transport asks the store for the events after ``Last-Event-ID`` and only afterwards
re-attaches the live stream, so an event stored in between would be lost, and it names streams by
the JSON-RPC request id alone, which two sessions may share. This store fixes both for the fake:

* stream logs are kept per session (the SDK calls ``store_event`` from tasks whose context carries
  the :data:`current_session` scope the ASGI middleware set), and
* a replay of a request stream *follows* the log until the request's response has been sent, so
  the resuming client gets everything, however its GET races the tool.

The standalone GET stream is replayed without following (it never ends with a response).
"""

from __future__ import annotations

import contextvars
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

import anyio
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse


class SessionScope:
    """Identity of one MCP session as seen from inside the server's tasks."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)
        self.session_id: str | None = None


#: Set by the ASGI middleware for every request; inherited by the session's router task.
current_session: contextvars.ContextVar[SessionScope | None] = contextvars.ContextVar(
    "fake_docling_session", default=None
)


@dataclass
class _StreamLog:
    stream_id: StreamId
    key: tuple[int, StreamId] | None = None
    events: list[tuple[EventId, JSONRPCMessage | None]] = field(default_factory=list)
    finished: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)

    def append(self, event_id: EventId, message: JSONRPCMessage | None) -> None:
        self.events.append((event_id, message))
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self.finished = True
        self.changed.set()
        self.changed = anyio.Event()


class FollowingEventStore(EventStore):
    """Per-session stream logs; a replay of a request stream lasts until its response."""

    def __init__(self, max_streams: int = 2000) -> None:
        self._counter = itertools.count(1)
        self._open: dict[tuple[int, StreamId], _StreamLog] = {}
        self._by_event: OrderedDict[EventId, tuple[_StreamLog, int]] = OrderedDict()
        self._logs: OrderedDict[int, _StreamLog] = OrderedDict()
        self._max_streams = max_streams

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        scope = current_session.get()
        key = (scope.id if scope is not None else 0, stream_id)
        log = self._open.get(key)
        if log is None or log.finished:
            log = _StreamLog(stream_id, key)
            self._open[key] = log
            self._logs[id(log)] = log
            self._prune()
        event_id = f"ev-{next(self._counter)}"
        self._by_event[event_id] = (log, len(log.events))
        log.append(event_id, message)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._by_event.get(last_event_id)
        if found is None:
            return None
        log, index = found
        position = index + 1
        while True:
            while position < len(log.events):
                event_id, message = log.events[position]
                position += 1
                if message is not None:
                    await send_callback(EventMessage(message, event_id))
            if log.finished or log.stream_id == GET_STREAM_KEY:
                return log.stream_id
            await log.changed.wait()

    def _prune(self) -> None:
        while len(self._logs) > self._max_streams:
            _, old = self._logs.popitem(last=False)
            for event_id, _message in old.events:
                self._by_event.pop(event_id, None)
            # By its key, not by a walk over every open log: that walk made each new stream
            # cost O(max_streams), and a long benchmark's server slower and slower.
            if old.key is not None and self._open.get(old.key) is old:
                del self._open[old.key]
