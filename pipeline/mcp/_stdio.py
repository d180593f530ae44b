"""The spec's stdio transport: the server is a child process, JSON-RPC lines on its stdin/stdout.

One child per transport, started on the first message (lazily, so a worker process that never
converts never pays for a server). Every thread writes whole lines to its stdin under one lock;
one reader thread reads its stdout and *routes*: a response goes to the request that awaits its
id, a notification or server request to the oldest waiting request (the session handles them
the same whoever receives them: listeners are per client, a server ``ping`` is answered by a
write), or, when nothing waits, is kept briefly for the next request. The request's own thread
hands each message to its sink, so a sink may write (answer a ``ping``) without a lock held.

Deadlines hold as over HTTP: a request waits on its own inbox at most until its deadline,
whatever the child sends meanwhile; a write is bounded by it too (non-blocking pipe, ``poll``).
A :class:`CancelScope` wakes the waiting request at once. A line longer than ``max_reply_bytes``
is never held whole: the reader skips to its end and fails the request its id names (E312), or
every waiting request when the prefix names none.

A child that dies (EOF on stdout) fails its in-flight requests with E302. The *session* is tied to
the child: its ``Binding.session_id`` is the child's token (what ``initialize``'s reply carries),
so the next request on that binding raises ``SessionExpired`` exactly like an HTTP 404 for a
forgotten session, the client re-initializes once, and ``initialize`` (sent without a session)
starts a fresh child. An ``initialize`` on a child that already had one also gets a fresh child:
one child, one handshake. How children start and stop (no orphans) is in :mod:`._child`.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import select
import shlex
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from errors import CallCancelled, CallTimeout, ReplyTooLarge, ServerUnavailable, SessionExpired
from pipeline.mcp._child import ChildProcess
from pipeline.mcp._protocol import JsonObject, RequestId
from pipeline.mcp._timeouts import Deadline
from pipeline.mcp._transport import Binding, MessageSink, Reply, describe_message
from pipeline.mcp._watchdog import Alarm, CancelScope, Reason
from pipeline.mcp.settings import STDIO_PREFIX, stdio_origin

logger = logging.getLogger("pipeline.mcp.stdio")

DEFAULT_MAX_REPLY_BYTES = 128 * 1024 * 1024
_UNROUTED_KEPT = 64
_ID_IN_PREFIX = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')

_Kind = Literal["message", "dead", "too_large", "cancelled"]


@dataclass(frozen=True, slots=True)
class _Event:
    kind: _Kind
    message: JsonObject | None = None
    text: str = ""


class _Waiter:
    """One request's inbox, filled by the reader thread (and by its cancel scope)."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[_Event] = queue.SimpleQueue()


class _WakingAlarm(Alarm):
    """A cancel scope's alarm that wakes a waiting request instead of shutting a socket."""

    __slots__ = ("_waiter",)

    def __init__(self, waiter: _Waiter) -> None:
        super().__init__(float("inf"))
        self._waiter = waiter

    def fire(self, reason: Reason) -> None:
        super().fire(reason)
        if self.reason == "cancelled" and not self.disarmed:
            self._waiter.inbox.put(_Event("cancelled"))


class _Connection:
    """One child and the routing of its stdout; dead for good once its stdout ends."""

    def __init__(self, child: ChildProcess, token: str, max_reply_bytes: int) -> None:
        self.child = child
        self.token = token
        self.handshakes = 0
        self.dead: str | None = None
        self._max = max_reply_bytes
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._waiters: dict[RequestId, _Waiter] = {}
        self._unrouted: deque[JsonObject] = deque(maxlen=_UNROUTED_KEPT)
        assert child.popen.stdin is not None and child.popen.stdout is not None
        self._stdin = child.popen.stdin.fileno()
        os.set_blocking(self._stdin, False)
        threading.Thread(
            target=self._read_loop, name=f"mcp-stdio-reader-{child.pid}", daemon=True
        ).start()

    # --- requests ---------------------------------------------------------------------------

    def register(self, request_id: RequestId, what: str) -> _Waiter:
        waiter = _Waiter()
        with self._lock:
            if self.dead is not None:
                raise ServerUnavailable(f"{what}: {self.dead}")
            self._waiters[request_id] = waiter
            while self._unrouted:
                waiter.inbox.put(_Event("message", self._unrouted.popleft()))
        return waiter

    def unregister(self, request_id: RequestId) -> None:
        with self._lock:
            self._waiters.pop(request_id, None)

    def write(self, message: JsonObject, deadline: Deadline, what: str) -> None:
        """One line to the child's stdin, within the deadline; a cut line kills the child."""
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        if not self._write_lock.acquire(timeout=deadline.remaining()):
            raise CallTimeout(f"{what}: no answer within {deadline.seconds:g}s (stdin busy)")
        try:
            view = memoryview(data)
            poller = select.poll()
            poller.register(self._stdin, select.POLLOUT)
            while view:
                if self.dead is not None:
                    raise ServerUnavailable(f"{what}: {self.dead}")
                remaining = deadline.remaining()
                if remaining <= 0:
                    if len(view) < len(data):  # half a line on the wire: the stream is lost
                        self.die("a message to it was cut off at a deadline", stop=True)
                    raise CallTimeout(
                        f"{what}: no answer within {deadline.seconds:g}s (stdin full)"
                    )
                if not poller.poll(remaining * 1000):
                    continue
                try:
                    written = os.write(self._stdin, view)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise ServerUnavailable(
                        f"{what}: cannot write to the server child {self.child.pid}: {exc}"
                    ) from exc
                view = view[written:]
        finally:
            self._write_lock.release()

    # --- what comes back --------------------------------------------------------------------

    def _read_loop(self) -> None:
        stdout = self.child.popen.stdout
        assert stdout is not None
        fd, line, skipping = stdout.fileno(), bytearray(), False
        reason = "closed its stdout"
        try:
            while chunk := os.read(fd, 65536):
                start = 0
                while start <= len(chunk):
                    end = chunk.find(b"\n", start)
                    piece = chunk[start:] if end < 0 else chunk[start:end]
                    if not skipping and len(line) + len(piece) > self._max:
                        self._oversize(bytes((line + piece[:256])[:256]))
                        line.clear()
                        skipping = True
                    if not skipping:
                        line += piece
                    if end < 0:
                        break
                    if not skipping:
                        self._dispatch(bytes(line))
                    line.clear()
                    skipping = False
                    start = end + 1
        except (OSError, ValueError) as exc:
            reason = f"reading its stdout failed: {exc}"
        status = self.child.exit_status(wait_s=1.0)
        self.die(
            f"the server child {self.child.pid} {reason} ({status}){self.child.last_words()}",
            stop=status == "still running",
        )

    def _dispatch(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            decoded = json.loads(line)
        except ValueError:
            logger.warning("child %s wrote a non-JSON line: %.200r", self.child.pid, line)
            return
        for item in decoded if isinstance(decoded, list) else [decoded]:
            if isinstance(item, dict):
                self._route(item)
            else:
                logger.warning("child %s wrote a non-message: %.200r", self.child.pid, item)

    def _route(self, message: JsonObject) -> None:
        is_answer = "method" not in message
        request_id = message.get("id")
        with self._lock:
            if is_answer:
                if isinstance(request_id, (int, str)):
                    waiter = self._waiters.get(request_id)
                else:  # an error tied to no id: only unambiguous with one request waiting
                    waiter = next(iter(self._waiters.values())) if len(self._waiters) == 1 else None
            else:
                waiter = next(iter(self._waiters.values()), None)
                if waiter is None:
                    self._unrouted.append(message)
                    return
        if waiter is None:
            logger.info("dropping a reply to unknown or finished request %.40r", request_id)
            return
        waiter.inbox.put(_Event("message", message))

    def _oversize(self, prefix: bytes) -> None:
        """A line over the cap: fail the request it answers (all of them if it names none)."""
        text = (
            f"the reply is larger than {self._max} bytes (DOCLANE_MCP_MAX_REPLY_BYTES); "
            "reading stopped there"
        )
        method = prefix.find(b'"method"')
        found = _ID_IN_PREFIX.search(prefix)
        with self._lock:
            if method >= 0 and (found is None or method < found.start()):
                logger.warning(
                    "child %s: dropped an oversized message: %.80r", self.child.pid, prefix
                )
                return
            request_id = json.loads(found.group(1)) if found is not None else None
            if request_id is not None and request_id in self._waiters:
                targets = [self._waiters[request_id]]
            else:
                targets = list(self._waiters.values())
        for waiter in targets:
            waiter.inbox.put(_Event("too_large", text=text))

    def die(self, reason: str, *, stop: bool = False, expected: bool = False) -> None:
        """Mark the child dead and fail whatever waits on it (idempotent)."""
        with self._lock:
            if self.dead is not None:
                return
            self.dead = reason
            waiters = list(self._waiters.values())
        logger.log(logging.INFO if expected else logging.WARNING, "%s", reason)
        for waiter in waiters:
            waiter.inbox.put(_Event("dead", text=reason))
        if stop:
            threading.Thread(target=self.child.stop, args=(0.0, 1.0), daemon=True).start()


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
        self._connection: _Connection | None = None
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

    def post(
        self,
        message: JsonObject,
        binding: Binding,
        *,
        timeout: float,
        sink: MessageSink,
        cancel: CancelScope | None = None,
    ) -> Reply:
        what = describe_message(message)
        if cancel is not None:
            cancel.check(what)
        deadline = Deadline(timeout)
        connection = self._connection_for(message, binding, what)
        request_id = message.get("id")
        if "method" not in message or not isinstance(request_id, (int, str)):
            connection.write(message, deadline, what)  # a notification, or our answer
            return Reply(200, connection.token)
        waiter = connection.register(request_id, what)
        alarm = _WakingAlarm(waiter)
        if cancel is not None:
            cancel._register(alarm)
        try:
            connection.write(message, deadline, what)
            self._await(
                waiter,
                sink=sink,
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

    def _connection_for(self, message: JsonObject, binding: Binding, what: str) -> _Connection:
        stale: _Connection | None = None
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

    def _start(self) -> _Connection:
        child = ChildProcess.start(
            self.command, env=self._env if self._env is not None else dict(os.environ)
        )
        self._started += 1
        return _Connection(child, f"child-{child.pid}-{self._started}", self._max_reply_bytes)

    @staticmethod
    def _await(
        waiter: _Waiter,
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
