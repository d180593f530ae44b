"""One stdio child's streams: lines to its stdin, and its stdout routed to the waiting requests.

Every thread writes whole lines under one lock, non-blocking and within its deadline (a line cut
off by a deadline kills the child: the stream is lost). One reader thread reads stdout and hands
a response to the request waiting for its id, a notification or server request to the oldest
waiting request (the session handles them the same whoever receives them), or keeps it for the
next request when none waits. Each request's own thread takes its messages from its inbox, so
its sink may write (answer a ``ping``) with no lock held. A line longer than ``max_reply_bytes``
is never held whole: the reader skips to its end and fails the request its id names (E312), or
every waiting request when the prefix names none. A line that grows past a few MiB is parsed as
it arrives (``pipeline.mcp._large_reply``), never held whole either; shorter ones, nearly all,
are read whole and parsed by ``json.loads``. EOF on stdout is the child's death: whatever waits
is failed with the reason, exit status and last stderr lines included.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import select
import threading
from collections import deque
from dataclasses import dataclass
from typing import Literal

from errors import CallTimeout, ServerUnavailable
from pipeline.mcp._child import ChildProcess
from pipeline.mcp._large_reply import FEED_BYTES, STREAM_AFTER, LargeReplyParser
from pipeline.mcp.protocol import JsonObject, RequestId
from pipeline.mcp.timeouts import Deadline
from pipeline.mcp.watchdog import Alarm, Reason

logger = logging.getLogger("doclane.mcp.stdio")

_UNROUTED_KEPT = 64
_HEAD_BYTES = 256
_ID_IN_PREFIX = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')

Kind = Literal["message", "dead", "too_large", "cancelled"]


@dataclass(frozen=True, slots=True)
class Event:
    """What wakes a waiting request: a message for it, or the end of its wait and why."""

    kind: Kind
    message: JsonObject | None = None
    text: str = ""


class Waiter:
    """One request's inbox, filled by the reader thread (and by its cancel scope)."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[Event] = queue.SimpleQueue()


class WakingAlarm(Alarm):
    """A cancel scope's alarm that wakes a waiting request instead of shutting a socket."""

    __slots__ = ("_waiter",)

    def __init__(self, waiter: Waiter) -> None:
        super().__init__(float("inf"))
        self._waiter = waiter

    def fire(self, reason: Reason) -> None:
        super().fire(reason)
        if self.reason == "cancelled" and not self.disarmed:
            self._waiter.inbox.put(Event("cancelled"))


class ChildStream:
    """One child and the routing of its stdout; dead for good once its stdout ends."""

    def __init__(self, child: ChildProcess, token: str, max_reply_bytes: int) -> None:
        self.child = child
        self.token = token
        self.handshakes = 0
        self.dead: str | None = None
        self._max = max_reply_bytes
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._waiters: dict[RequestId, Waiter] = {}
        self._unrouted: deque[JsonObject] = deque(maxlen=_UNROUTED_KEPT)
        assert child.popen.stdin is not None and child.popen.stdout is not None
        self._stdin = child.popen.stdin.fileno()
        os.set_blocking(self._stdin, False)
        threading.Thread(
            target=self._read_loop, name=f"mcp-stdio-reader-{child.pid}", daemon=True
        ).start()

    # --- requests ---------------------------------------------------------------------------

    def register(self, request_id: RequestId, what: str) -> Waiter:
        waiter = Waiter()
        with self._lock:
            if self.dead is not None:
                raise ServerUnavailable(f"{what}: {self.dead}")
            self._waiters[request_id] = waiter
            while self._unrouted:
                waiter.inbox.put(Event("message", self._unrouted.popleft()))
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
        fd, line = stdout.fileno(), _Line()
        reason = "closed its stdout"
        try:
            while chunk := os.read(fd, 65536):
                start = 0
                while start <= len(chunk):
                    end = chunk.find(b"\n", start)
                    self._take(line, chunk[start:] if end < 0 else chunk[start:end])
                    if end < 0:
                        break
                    self._end_of_line(line)
                    line = _Line()
                    start = end + 1
        except (OSError, ValueError) as exc:
            reason = f"reading its stdout failed: {exc}"
        status = self.child.exit_status(wait_s=1.0)
        self.die(
            f"the server child {self.child.pid} {reason} ({status}){self.child.last_words()}",
            stop=status == "still running",
        )

    def _take(self, line: _Line, piece: bytes) -> None:
        """One piece of the line being read: kept, fed to its parser, or skipped."""
        if line.skipping:
            return
        if len(line.head) < _HEAD_BYTES:
            line.head += piece[: _HEAD_BYTES - len(line.head)]
        line.size += len(piece)
        if line.size > self._max:
            self._oversize(bytes(line.head))
            line.skip()
            return
        line.pending += piece
        if line.parser is None and line.size <= STREAM_AFTER:
            return
        if line.parser is None or len(line.pending) >= FEED_BYTES:
            line.parser = line.parser or LargeReplyParser()
            try:
                line.parser.feed(line.pending)
            except ValueError as exc:
                self._not_json(line.head, exc)
                line.skip()
                return
            line.pending.clear()

    def _end_of_line(self, line: _Line) -> None:
        if line.skipping:
            return
        if line.parser is None:
            self._dispatch(line.pending)
            return
        try:
            line.parser.feed(line.pending)
            line.pending.clear()
            decoded = line.parser.finish()
        except ValueError as exc:
            self._not_json(line.head, exc)
            return
        self._deliver(decoded)

    def _dispatch(self, line: bytearray) -> None:
        if not line.strip():
            return
        try:
            decoded = json.loads(line)
        except ValueError as exc:
            self._not_json(line, exc)
            return
        self._deliver(decoded)

    def _not_json(self, line: bytes | bytearray, exc: ValueError) -> None:
        logger.warning(
            "child %s wrote a non-JSON line: %.200r (%s)",
            self.child.pid,
            bytes(line[:256]),
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )

    def _deliver(self, decoded: object) -> None:
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
        waiter.inbox.put(Event("message", message))

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
            waiter.inbox.put(Event("too_large", text=text))

    def die(self, reason: str, *, stop: bool = False, expected: bool = False) -> None:
        """Mark the child dead and fail whatever waits on it (idempotent)."""
        with self._lock:
            if self.dead is not None:
                return
            self.dead = reason
            waiters = list(self._waiters.values())
        logger.log(logging.INFO if expected else logging.WARNING, "%s", reason)
        for waiter in waiters:
            waiter.inbox.put(Event("dead", text=reason))
        if stop:
            threading.Thread(target=self.child.stop, args=(0.0, 1.0), daemon=True).start()


class _Line:
    """The line being read: its bytes while short, a parse in progress once long, or skipped."""

    __slots__ = ("head", "parser", "pending", "size", "skipping")

    def __init__(self) -> None:
        self.head = bytearray()  # its first bytes, for the log and the E312 routing
        self.pending = bytearray()  # read and not yet parsed
        self.size = 0
        self.parser: LargeReplyParser | None = None
        self.skipping = False

    def skip(self) -> None:
        """Read the rest of the line without keeping it."""
        self.skipping, self.parser, self.pending = True, None, bytearray()
