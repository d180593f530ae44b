"""The spec's stdio transport: the server is a child process, JSON-RPC lines on its stdin/stdout.

One child per transport, started on the first message (lazily, so a worker process that never
converts never pays for a server). How its lines are written and its replies routed to the
waiting requests is :mod:`._stdio_stream`; how it is started and stopped (no orphans) is
:mod:`._child`. This module is the ``Transport`` the session sees, and the child's lifecycle.

Deadlines hold as over HTTP: a request waits on its own inbox at most until its deadline,
whatever the child sends meanwhile, and its write is bounded by it too. A :class:`CancelScope`
wakes the waiting request at once (``CallCancelled``; the session then sends
``notifications/cancelled``, as after a timeout).

A child that dies (EOF on stdout) fails its in-flight requests with E302. The *session* is tied to
the child: its ``Binding.session_id`` is the child's token (what ``initialize``'s reply carries),
so the next request on that binding raises ``SessionExpired`` exactly like an HTTP 404 for a
forgotten session, the client re-initializes once, and ``initialize`` (sent without a session)
starts a fresh child. An ``initialize`` on a child that already had one also gets a fresh child:
one child, one handshake.
"""

from __future__ import annotations

import logging
import os
import queue
import shlex
import threading
import weakref
from collections.abc import Sequence

from errors import CallCancelled, CallTimeout, ReplyTooLarge, ServerUnavailable, SessionExpired
from pipeline.mcp._child import ChildProcess
from pipeline.mcp._stdio_stream import ChildStream, Waiter, WakingAlarm
from pipeline.mcp.endpoints import STDIO_PREFIX, stdio_origin
from pipeline.mcp.protocol import JsonObject
from pipeline.mcp.timeouts import Deadline
from pipeline.mcp.transport import Binding, MessageSink, Outgoing, Reply
from pipeline.mcp.watchdog import CancelScope

logger = logging.getLogger("doclane.mcp.stdio")

DEFAULT_MAX_REPLY_BYTES = 128 * 1024 * 1024


class StdioTransport:
    """The stdio transport; see the module docstring."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        grace_s: float = 2.0,
        env: dict[str, str] | None = None,
    ) -> None:
        if not command:
            raise ValueError("a stdio transport needs a command")
        self.command = list(command)
        self._endpoint = STDIO_PREFIX + shlex.join(self.command)
        self._max_reply_bytes = max_reply_bytes
        self._grace_s = grace_s
        self._env = env
        self._lock = threading.Lock()
        self._connection: ChildStream | None = None
        self._started = 0
        self._closed = False
        _TRANSPORTS.add(self)

    @classmethod
    def from_endpoint(
        cls, endpoint: str, *, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, grace_s: float = 2.0
    ) -> StdioTransport:
        """``stdio:<command line>`` (shell-like quoting) -> a transport for that command."""
        return cls(
            shlex.split(endpoint.removeprefix(STDIO_PREFIX)),
            max_reply_bytes=max_reply_bytes,
            grace_s=grace_s,
        )

    @property
    def endpoint(self) -> str:
        return self._endpoint

    @property
    def origin(self) -> str:
        """The breaker key: this process's child of this command, nobody else's."""
        return stdio_origin(self._endpoint)

    @property
    def child_pid(self) -> int | None:
        """The running child's pid (None before the first message, after a death or close)."""
        connection = self._connection
        return connection.child.pid if connection is not None and not connection.dead else None

    def __repr__(self) -> str:
        return f"StdioTransport({self._endpoint!r})"

    # --- the protocol ----------------------------------------------------------------------

    def post(self, outgoing: Outgoing) -> Reply:
        what = outgoing.begin()
        message, cancel = outgoing.message, outgoing.cancel
        deadline = Deadline(outgoing.timeout)
        connection = self._connection_for(message, outgoing.binding, what)
        request_id = message.get("id")
        if "method" not in message or not isinstance(request_id, (int, str)):
            connection.write(message, deadline, what)  # a notification, or our answer
            return Reply(200, connection.token)
        waiter = connection.register(request_id, what)
        alarm = WakingAlarm(waiter)
        if cancel is not None:
            cancel._register(alarm)
        try:
            connection.write(message, deadline, what)
            self._await(
                waiter,
                sink=outgoing.sink,
                deadline=deadline,
                what=what,
                cancel=cancel,
                max_bytes=self._max_reply_bytes,
            )
        finally:
            alarm.disarmed = True
            if cancel is not None:
                cancel._unregister(alarm)
            connection.unregister(request_id)
        return Reply(200, connection.token)

    def delete(self, binding: Binding) -> None:
        """Nothing to end on the server: the session is the child, and :meth:`close` stops it."""

    def close(self) -> None:
        """Stop the child: close its stdin, wait a grace, SIGTERM, wait, SIGKILL. Idempotent."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.die("the client was closed", expected=True)
            connection.child.stop(self._grace_s, self._grace_s)

    # --- internals --------------------------------------------------------------------------

    def _connection_for(self, message: JsonObject, binding: Binding, what: str) -> ChildStream:
        stale: ChildStream | None = None
        with self._lock:
            if self._closed:
                raise ServerUnavailable(f"{what}: the stdio transport is closed")
            connection = self._connection
            if binding.session_id is not None:
                if connection is None or connection.dead or connection.token != binding.session_id:
                    why = connection.dead if connection is not None and connection.dead else "gone"
                    raise SessionExpired(
                        f"{what}: the server child of that session is gone ({why}); "
                        "a fresh child needs a new handshake"
                    )
                return connection
            handshake = message.get("method") == "initialize"
            if connection is not None and (
                connection.dead or (handshake and connection.handshakes)
            ):
                stale, connection = connection, None
            if connection is None:
                connection = self._start()
                self._connection = connection
            if handshake:
                connection.handshakes += 1
        if stale is not None and stale.dead is None:
            stale.die("replaced by a fresh child for a new handshake", stop=True, expected=True)
        return connection

    def _start(self) -> ChildStream:
        child = ChildProcess.start(
            self.command, env=self._env if self._env is not None else dict(os.environ)
        )
        self._started += 1
        return ChildStream(child, f"child-{child.pid}-{self._started}", self._max_reply_bytes)

    @staticmethod
    def _await(
        waiter: Waiter,
        *,
        sink: MessageSink,
        deadline: Deadline,
        what: str,
        cancel: CancelScope | None,
        max_bytes: int,
    ) -> None:
        while True:
            remaining = deadline.remaining()
            if remaining <= 0:
                raise CallTimeout(f"{what}: no answer within {deadline.seconds:g}s")
            try:
                event = waiter.inbox.get(timeout=remaining)
            except queue.Empty:
                continue
            if event.kind == "message" and event.message is not None:
                if sink(event.message):
                    return
            elif event.kind == "cancelled":
                reason = cancel.reason if cancel is not None else "cancelled"
                raise CallCancelled(f"{what}: withdrawn ({reason})")
            elif event.kind == "too_large":
                raise ReplyTooLarge(f"{what}: {event.text}", detail={"limit_bytes": max_bytes})
            elif event.kind == "dead":
                raise ServerUnavailable(f"{what}: {event.text}")

    def _forget_after_fork(self) -> None:
        """A forked copy must not touch the parent's child: it starts its own when used."""
        self._lock = threading.Lock()
        self._connection = None


_TRANSPORTS: weakref.WeakSet[StdioTransport] = weakref.WeakSet()


def _forget_children_after_fork() -> None:
    for transport in list(_TRANSPORTS):
        transport._forget_after_fork()


os.register_at_fork(after_in_child=_forget_children_after_fork)
