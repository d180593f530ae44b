"""The MCP server as a child process: start it so it dies with us, log its stderr, stop it.

Orphans. A worker process can be SIGKILLed (the OOM killer, Celery's hard time limit, an
operator); no ``finally`` runs then, so the child must die on its own. On Linux the child is
started through a tiny launcher that sets ``PR_SET_PDEATHSIG`` to SIGKILL and then ``exec``\\ s the
server (the setting survives ``exec``), and exits at once if its parent is already gone. Three
choices make that robust:

* the launcher is a separate ``python -c`` rather than a ``preexec_fn``: a ``preexec_fn`` runs
  between ``fork`` and ``exec`` in a copy of a *threaded* parent (watchdog, lease keepers) and
  may deadlock on a lock some other thread held at the fork; the launcher is a fresh process;
* ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child ends, not the process, so
  every child is forked by one long-lived spawner thread per process, never by a short-lived
  batch or request thread (the child would be killed when that thread finished);
* the child gets its own session (``start_new_session``): signals sent to the worker's process
  group (Ctrl-C, a supervisor's ``kill -- -pgid``) reach the worker, which then stops its child
  in order (stdin closed, SIGTERM, SIGKILL) instead of the child dying under an in-flight call;
  and the stop sequence signals the child's own group, so helpers the server started go too.

stderr is the server's log: a reader thread forwards it to doclane's log line by line, each line
cut at :data:`STDERR_LINE_LIMIT` bytes and the rate capped (a token bucket), so a chatty or
runaway server costs bounded log volume; it always keeps draining, so the child never blocks on
a full pipe. The last lines are kept to explain a death.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from errors import ServerUnavailable

logger = logging.getLogger("doclane.mcp.stdio")
child_log = logging.getLogger("doclane.mcp.stdio.child")

T = TypeVar("T")

STDERR_LINE_LIMIT = 4096
#: The stderr token bucket: a burst of this many lines, then this many lines a second.
STDERR_BURST = 200
STDERR_LINES_PER_S = 50.0
_KILL_REAP_S = 2.0
_SPAWN_TIMEOUT_S = 30.0

#: Run as ``python -c`` between us and the server: set PR_SET_PDEATHSIG (1), then exec.
_LAUNCHER = """\
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
    sys.stderr.write("doclane launcher: prctl(PR_SET_PDEATHSIG) failed\\n")
    sys.exit(126)
if os.getppid() != int(sys.argv[1]):
    os._exit(0)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"doclane launcher: cannot run {sys.argv[2]!r}: {exc}\\n")
    sys.exit(127)
"""


class _Spawner:
    """One daemon thread per process that forks every child (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]]
        self._jobs = queue.SimpleQueue()
        self._pid: int | None = None

    def run(self, job: Callable[[], T]) -> T:
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked copy without the thread
                self._pid = os.getpid()
                self._jobs = queue.SimpleQueue()
                jobs = self._jobs
                threading.Thread(
                    target=self._serve, args=(jobs,), name="mcp-stdio-spawner", daemon=True
                ).start()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((job, box, done))
        if not done.wait(_SPAWN_TIMEOUT_S):
            raise ServerUnavailable(f"starting the server took over {_SPAWN_TIMEOUT_S:g}s")
        if "error" in box:
            raise box["error"]
        value: T = box["value"]
        return value

    @staticmethod
    def _serve(
        jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]],
    ) -> None:
        while True:
            job, box, done = jobs.get()
            try:
                box["value"] = job()
            except BaseException as exc:  # handed to the caller, raised there
                box["error"] = exc
            done.set()


_SPAWNER = _Spawner()


class ChildProcess:
    """One running server process: its pipes, its stderr pump, and its stop sequence."""

    def __init__(self, popen: subprocess.Popen[bytes], name: str) -> None:
        self.popen = popen
        self.name = name
        self.tail: collections.deque[str] = collections.deque(maxlen=8)
        self._stderr = threading.Thread(
            target=self._pump_stderr, name=f"mcp-stdio-stderr-{popen.pid}", daemon=True
        )
        self._stderr.start()

    @classmethod
    def start(cls, argv: Sequence[str], *, env: dict[str, str] | None = None) -> ChildProcess:
        """Start ``argv`` with pipes on stdin/stdout/stderr; E302 if it cannot be started."""
        if not argv:
            raise ServerUnavailable("DOCLING_MCP_COMMAND is empty")
        if shutil.which(argv[0], path=(env or os.environ).get("PATH")) is None:
            raise ServerUnavailable(f"cannot start the server: command not found: {argv[0]!r}")
        command = list(argv)
        if sys.platform.startswith("linux"):
            command = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *argv]

        def spawn() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                close_fds=True,
                start_new_session=True,
                env=env,
            )

        try:
            popen = _SPAWNER.run(spawn)
        except OSError as exc:
            raise ServerUnavailable(f"cannot start the server {argv[0]!r}: {exc}") from exc
        child = cls(popen, os.path.basename(argv[0]))
        logger.info("started MCP server %s as child %s", child.name, popen.pid)
        return child

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_status(self, wait_s: float = 0.0) -> str:
        """How the child ended (``exit code 1``, ``killed by SIGKILL``), or that it still runs."""
        try:
            code = self.popen.wait(wait_s) if wait_s > 0 else self.popen.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def last_words(self, wait_s: float = 1.0) -> str:
        """The last stderr lines, to explain a death (empty when there were none).

        A dead child's stderr ends too: give its reader up to ``wait_s`` to catch up with it.
        """
        self._stderr.join(wait_s)
        lines = list(self.tail)
        return (" | stderr: " + " / ".join(lines)) if lines else ""

    def stop(self, grace_s: float, term_s: float) -> None:
        """Close stdin and wait ``grace_s``; then SIGTERM, wait ``term_s``; then SIGKILL."""
        popen = self.popen
        if popen.stdin is not None:
            with contextlib.suppress(OSError):  # already broken: the child is going anyway
                popen.stdin.close()
        for sig, wait_s in (
            (None, grace_s),
            (signal.SIGTERM, term_s),
            (signal.SIGKILL, _KILL_REAP_S),
        ):
            if sig is not None:
                self._signal(sig)
            try:
                popen.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
            logger.info("MCP server child %s stopped: %s", popen.pid, self.exit_status())
            break
        else:
            logger.warning("MCP server child %s survived SIGKILL; abandoning it", popen.pid)
        if popen.stdout is not None:
            popen.stdout.close()

    def _signal(self, sig: signal.Signals) -> None:
        """``sig`` to the child's process group (its own session), or to it alone."""
        if self.popen.poll() is not None:
            return
        logger.info("sending %s to MCP server child %s", sig.name, self.popen.pid)
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            self.popen.send_signal(sig)

    def _pump_stderr(self) -> None:
        stream = self.popen.stderr
        if stream is None:
            return
        fd = stream.fileno()
        bucket = _TokenBucket(STDERR_BURST, STDERR_LINES_PER_S)
        pending = b""
        try:
            while chunk := os.read(fd, 65536):
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > STDERR_LINE_LIMIT:
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self._emit(line, bucket)
        except OSError as exc:
            logger.debug("stderr of child %s: %s", self.popen.pid, exc)
        finally:
            if pending:
                self._emit(pending, bucket)
            bucket.flush(self.popen.pid)
            stream.close()

    def _emit(self, raw: bytes, bucket: _TokenBucket) -> None:
        cut = len(raw) > STDERR_LINE_LIMIT
        text = raw[:STDERR_LINE_LIMIT].decode("utf-8", errors="replace").rstrip()
        if not text:
            return
        self.tail.append(text[:500])
        if bucket.take(self.popen.pid):
            child_log.info("[%s %s] %s%s", self.name, self.popen.pid, text, " [cut]" if cut else "")


class _TokenBucket:
    """At most ``burst`` lines at once and ``rate`` a second after that; counts the rest."""

    def __init__(self, burst: int, rate: float) -> None:
        self.burst, self.rate = float(burst), rate
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.dropped = 0

    def take(self, pid: int) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            self.dropped += 1
            return False
        self.tokens -= 1.0
        self.flush(pid)
        return True

    def flush(self, pid: int) -> None:
        if self.dropped:
            child_log.warning(
                "child %s: %d stderr lines not logged (rate limit)", pid, self.dropped
            )
            self.dropped = 0
