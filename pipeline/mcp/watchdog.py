"""Ending a request on time, or on request, whatever the server keeps sending.

httpx's read timeout bounds each *read*, not a request: every byte a server sends starts it
again. An SDK server keeps a slow SSE reply alive with comments and empty events every 15 s, and
a misbehaving one can trickle a JSON body a byte at a time, so a read timeout alone lets a hung
conversion hold a worker for as long as the server likes. So every exchange gets an
:class:`Alarm`: at its deadline, or when its :class:`CancelScope` is cancelled from another
thread, the alarm shuts the connection's socket down. The blocked read returns at once, and the
transport, seeing the alarm fired, raises E303 (deadline) or ``CallCancelled`` (cancelled)
instead of the connection error the read ran into.

One :class:`Watchdog` thread per process keeps every pending deadline in a heap; arming and
disarming cost a lock and a heap push, no thread per request. The socket comes from the
response's documented ``network_stream`` extension. Until the response headers arrive there is
no socket to shut down; httpx's own timeouts (set to what is left of the deadline when the
request starts) bound that part.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import logging
import math
import os
import socket
import threading
import time
from typing import Any, Literal

from errors import CallCancelled

log = logging.getLogger("doclane.mcp.watchdog")

Reason = Literal["deadline", "cancelled"]


class Alarm:
    """One exchange's tripwire: fired at most once, by the deadline or by cancellation."""

    __slots__ = ("_lock", "_sock", "at", "disarmed", "reason")

    def __init__(self, at: float) -> None:
        self.at = at
        self.reason: Reason | None = None
        self.disarmed = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    @property
    def fired(self) -> bool:
        return self.reason is not None

    def attach(self, network_stream: Any) -> None:
        """Watch the connection a response arrived on (shut it down now if already fired)."""
        sock = _socket_of(network_stream)
        with self._lock:
            self._sock = sock
            if self.reason is not None:
                _shutdown(sock)

    def detach(self) -> None:
        """The response is done with: its connection may go back to the pool untouched."""
        with self._lock:
            self._sock = None

    def fire(self, reason: Reason) -> None:
        with self._lock:
            if self.reason is not None or self.disarmed:
                return
            self.reason = reason
            _shutdown(self._sock)


class Watchdog:
    """Fires alarms at their deadlines, from one daemon thread started on first use."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Alarm]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._pid: int | None = None
        #: When the thread wakes next by itself (inf: only when notified).
        self._wake_at = math.inf
        os.register_at_fork(after_in_child=self._forget_after_fork)

    def _forget_after_fork(self) -> None:
        """A forked child (a Celery pool process) inherits the heap and lock, not the thread."""
        self._heap = []
        self._cond = threading.Condition()
        self._pid = None
        self._wake_at = math.inf

    def arm(self, seconds: float) -> Alarm:
        alarm = Alarm(time.monotonic() + seconds)
        with self._cond:
            self._ensure_thread()
            heap = self._heap
            # Disarmed alarms are dropped lazily; without this they would pile up here until
            # their (minutes away) deadlines came, one per request: memory and heap pushes.
            while heap and heap[0][2].disarmed:
                heapq.heappop(heap)
            heapq.heappush(heap, (alarm.at, next(self._seq), alarm))
            if alarm.at < self._wake_at:  # else the thread wakes before it is due anyway
                self._cond.notify()
        return alarm

    @staticmethod
    def disarm(alarm: Alarm) -> None:
        """Forget ``alarm`` (lazily: its heap entry is dropped when its time comes)."""
        with alarm._lock:
            alarm.disarmed = True
            alarm._sock = None

    def _ensure_thread(self) -> None:
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        threading.Thread(target=self._run, name="mcp-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._cond:
                due: list[Alarm] = []
                now = time.monotonic()
                while self._heap and (self._heap[0][0] <= now or self._heap[0][2].disarmed):
                    due.append(heapq.heappop(self._heap)[2])
                if not due:
                    self._wake_at = self._heap[0][0] if self._heap else math.inf
                    self._cond.wait(self._wake_at - now if self._heap else None)
                    continue
            for alarm in due:
                alarm.fire("deadline")


_WATCHDOG = Watchdog()


def arm(seconds: float, scope: CancelScope | None) -> Alarm:
    """An alarm at ``seconds`` from now, also fired when ``scope`` is cancelled."""
    alarm = _WATCHDOG.arm(seconds)
    if scope is not None:
        scope._register(alarm)
    return alarm


def disarm(alarm: Alarm, scope: CancelScope | None) -> None:
    Watchdog.disarm(alarm)
    if scope is not None:
        scope._unregister(alarm)


class CancelScope:
    """Withdraw every MCP request made inside ``with scope:`` (from any thread, at any time).

    A job's attempt enters one around its conversion; when the lease keeper finds the job
    cancelled it calls :meth:`cancel`, and the request in flight ends at once with
    ``CallCancelled`` (the client then tells the server ``notifications/cancelled``); a request
    started after that raises before it is sent.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self._alarms: set[Alarm] = set()
        self._lock = threading.Lock()
        self._token: contextvars.Token[CancelScope | None] | None = None

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            alarms = list(self._alarms)
        for alarm in alarms:
            alarm.fire("cancelled")

    def check(self, what: str) -> None:
        if self.reason is not None:
            raise CallCancelled(f"{what}: withdrawn before sending ({self.reason})")

    def _register(self, alarm: Alarm) -> None:
        with self._lock:
            self._alarms.add(alarm)
            cancelled = self.reason is not None
        if cancelled:
            alarm.fire("cancelled")

    def _unregister(self, alarm: Alarm) -> None:
        with self._lock:
            self._alarms.discard(alarm)

    def __enter__(self) -> CancelScope:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


_CURRENT: contextvars.ContextVar[CancelScope | None] = contextvars.ContextVar(
    "doclane_mcp_cancel_scope", default=None
)


def current_scope() -> CancelScope | None:
    """The innermost :class:`CancelScope` this code runs in, if any."""
    return _CURRENT.get()


def _socket_of(network_stream: Any) -> socket.socket | None:
    if network_stream is None:
        return None
    try:
        sock = network_stream.get_extra_info("socket")
    except Exception:  # an unusual stream (a test double): nothing to shut down
        return None
    return sock if isinstance(sock, socket.socket) else None


def _shutdown(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError as exc:  # already closed by its owner: nothing left to wake
        log.debug("shutting down a socket: %s", exc)
