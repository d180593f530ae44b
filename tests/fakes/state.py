"""Everything the fake remembers: knobs, counters the tests read, and the document cache.

One instance per server process, touched only from its event loop (no locks needed). The ASGI
middleware, the MCP middleware, the tools and the control endpoints all share it.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio

from tests.fakes.documents import Document
from tests.fakes.event_store import SessionScope
from tests.fakes.knobs import Knobs


class DocumentCache:
    """The real server's in-process LRU of converted documents, shared by all sessions."""

    def __init__(self, max_documents: int) -> None:
        self.max_documents = max_documents
        self._documents: OrderedDict[str, Document] = OrderedDict()
        self.evictions = 0

    def get(self, key: str) -> Document | None:
        document = self._documents.get(key)
        if document is not None:
            self._documents.move_to_end(key)
        return document

    def put(self, document: Document) -> None:
        self._documents[document.key] = document
        self._documents.move_to_end(document.key)
        while len(self._documents) > self.max_documents:
            self._documents.popitem(last=False)
            self.evictions += 1

    def remove(self, key: str) -> bool:
        return self._documents.pop(key, None) is not None

    def clear(self) -> int:
        count = len(self._documents)
        self._documents.clear()
        return count

    def keys(self) -> list[str]:
        return list(self._documents)


@dataclass
class Stats:
    """Counters and recordings served by ``GET /_control/stats``."""

    requests_by_method: Counter[str] = field(default_factory=Counter)
    requests_by_tool: Counter[str] = field(default_factory=Counter)
    http_requests_by_verb: Counter[str] = field(default_factory=Counter)
    initialize_calls: int = 0
    session_ids_issued: list[str] = field(default_factory=list)
    session_ids_seen: list[str] = field(default_factory=list)
    last_request_headers: dict[str, str] = field(default_factory=dict)
    last_headers_by_method: dict[str, dict[str, str]] = field(default_factory=dict)
    deletes: int = 0
    auth_rejections: int = 0
    faults_injected: list[dict[str, Any]] = field(default_factory=list)
    streams_dropped: int = 0
    last_event_ids: list[str] = field(default_factory=list)
    resume_delays_s: list[float] = field(default_factory=list)
    server_request_answers: list[dict[str, Any]] = field(default_factory=list)
    client_responses: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[dict[str, Any]] = field(default_factory=list)
    #: Tool calls inside their slot (``max_concurrent_calls``) now, and the most at once.
    tool_calls_working: int = 0
    max_tool_calls_working: int = 0
    progress_sent: int = 0
    log_messages_sent: int = 0
    list_changed_sent: int = 0
    keepalives_sent: int = 0
    directory_calls: list[str] = field(default_factory=list)
    #: Documents the directory tool converted (cache hits and skipped files not counted).
    directory_conversions: int = 0
    trickled_bytes: int = 0
    tool_calls_in_flight: int = 0
    max_tool_calls_in_flight: int = 0
    #: Calls waiting on a hang right now: a test releases them (reset) only once they wait.
    hanging_calls: int = 0
    last_drop_at: float | None = None
    #: The W3C ``traceparent`` in each tool call's ``params._meta`` (SEP-414), in call order.
    tool_call_traceparents: list[str] = field(default_factory=list)

    def to_json(self, cache: DocumentCache) -> dict[str, Any]:
        return {
            "requests_by_method": dict(self.requests_by_method),
            "requests_by_tool": dict(self.requests_by_tool),
            "http_requests_by_verb": dict(self.http_requests_by_verb),
            "initialize_calls": self.initialize_calls,
            "session_ids_issued": list(self.session_ids_issued),
            "session_ids_seen": list(self.session_ids_seen),
            "last_request_headers": dict(self.last_request_headers),
            "last_headers_by_method": {k: dict(v) for k, v in self.last_headers_by_method.items()},
            "deletes": self.deletes,
            "auth_rejections": self.auth_rejections,
            "faults_injected": list(self.faults_injected),
            "streams_dropped": self.streams_dropped,
            "last_event_ids": list(self.last_event_ids),
            "resume_delays_s": list(self.resume_delays_s),
            "server_request_answers": list(self.server_request_answers),
            "client_responses": list(self.client_responses),
            "cancelled": list(self.cancelled),
            "progress_sent": self.progress_sent,
            "log_messages_sent": self.log_messages_sent,
            "list_changed_sent": self.list_changed_sent,
            "keepalives_sent": self.keepalives_sent,
            "directory_calls": list(self.directory_calls),
            "directory_conversions": self.directory_conversions,
            "trickled_bytes": self.trickled_bytes,
            "tool_calls_in_flight": self.tool_calls_in_flight,
            "max_tool_calls_in_flight": self.max_tool_calls_in_flight,
            "hanging_calls": self.hanging_calls,
            "tool_calls_working": self.tool_calls_working,
            "max_tool_calls_working": self.max_tool_calls_working,
            "tool_call_traceparents": list(self.tool_call_traceparents),
            "cached_documents": cache.keys(),
            "cache_evictions": cache.evictions,
        }


class FakeState:
    """The shared state of one fake server process."""

    def __init__(self, *, defaults: Knobs, cache_dir: str, profile: str) -> None:
        self.defaults = defaults
        self.knobs = defaults
        self.profile = profile
        self.cache_dir = cache_dir
        self.stats = Stats()
        self.cache = DocumentCache(defaults.cache_max_documents)
        self._hang_release: anyio.Event | None = None
        self._slots: tuple[int, anyio.Semaphore] | None = None
        #: Session id -> the scope object its server tasks carry (see event_store).
        self.sessions: dict[str, SessionScope] = {}

    def configure(self, changes: dict[str, Any]) -> Knobs:
        self.knobs = self.knobs.updated(changes)
        self.cache.max_documents = self.knobs.cache_max_documents
        return self.knobs

    def reset(self) -> None:
        """Back to the start-up knobs; counters, cache and hanging calls cleared."""
        self.knobs = self.defaults
        self.stats = Stats()
        self.cache = DocumentCache(self.defaults.cache_max_documents)
        self.release_hanging()

    def call_slots(self) -> anyio.Semaphore | None:
        """The semaphore of ``max_concurrent_calls`` (a new one when the knob changes)."""
        limit = self.knobs.max_concurrent_calls
        if limit is None:
            return None
        if self._slots is None or self._slots[0] != limit:
            self._slots = (limit, anyio.Semaphore(limit))
        return self._slots[1]

    @property
    def hang_release(self) -> anyio.Event:
        """Set when hanging calls must give up (reset, forget-sessions); created in the loop."""
        if self._hang_release is None:
            self._hang_release = anyio.Event()
        return self._hang_release

    def release_hanging(self) -> None:
        if self._hang_release is not None:
            self._hang_release.set()
        self._hang_release = None

    def take_fault(self, method: str, tool: str | None, *, is_request: bool) -> str | None:
        """Consume one injected failure for this message, if it is a target; return its kind."""
        knobs = self.knobs
        if not knobs.fault_applies_to(method, tool, is_request=is_request):
            return None
        if knobs.fail_next > 0:
            self.knobs = knobs.updated({"fail_next": knobs.fail_next - 1})
        self.stats.faults_injected.append(
            {"fault": knobs.fail_with, "method": method, "tool": tool, "at": time.time()}
        )
        return knobs.fail_with

    def record_session_issued(self, session_id: str, scope: SessionScope) -> None:
        if session_id not in self.sessions:
            scope.session_id = session_id
            self.sessions[session_id] = scope
            self.stats.session_ids_issued.append(session_id)

    def record_session_seen(self, session_id: str) -> None:
        if session_id not in self.stats.session_ids_seen:
            self.stats.session_ids_seen.append(session_id)
