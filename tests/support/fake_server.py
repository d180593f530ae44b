"""The fake Docling MCP server (tests/fakes/) as a real process, and its control API.

A plain module (no pytest): the fixtures of tests/fixtures/fake_server.py and the benches of
bench/ both start the fake through it. The :class:`FakeServer` handle is the whole API::

    server.url / .origin / .port / .pid / .running / .log_path / .cache_dir
    server.configure(fail_next=1, fail_with="http503")   # any knob of tests.fakes.knobs.Knobs
    server.reset(); server.knobs(); server.stats()
    server.forget_sessions()   # every session ends: old Mcp-Session-Id -> HTTP 404
    server.evict()             # the document cache is emptied: exports of known keys fail
    server.stop(); server.start(); server.restart()   # same port again; sessions and cache gone
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from tests.fixtures.waiting import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
_instance_numbers = itertools.count(1)


class FakeServerError(RuntimeError):
    """The fake server did not start, or its control API refused a request."""


class FakeServer:
    """A fake Docling MCP server process and its control API."""

    def __init__(
        self,
        workdir: Path,
        *,
        profile: str = "docling",
        json_response: bool = False,
        cache_max_documents: int = 10,
        port: int = 0,
        startup_timeout: float = 30.0,
        also_hosts: tuple[str, ...] = (),
    ) -> None:
        self.also_hosts = also_hosts
        self.profile = profile
        self.json_response = json_response
        self.cache_max_documents = cache_max_documents
        self.startup_timeout = startup_timeout
        number = next(_instance_numbers)
        self.workdir = workdir
        self.cache_dir = workdir / f"cache-{number}"
        self.log_path = workdir / f"fake-server-{number}.log"
        self._url_file = workdir / f"url-{number}"
        self._port = port
        self._url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._control: httpx.Client | None = None

    # --- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. ``http://127.0.0.1:PORT/mcp``."""
        if self._url is None:
            raise FakeServerError("the fake server has not been started")
        return self._url

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/mcp")

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int:
        if self._process is None:
            raise FakeServerError("the fake server has not been started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # --- process ------------------------------------------------------------------------------

    def start(self) -> FakeServer:
        """Start the process (on the same port as before, if it ran) and wait until it answers."""
        if self.running:
            return self
        self._url_file.unlink(missing_ok=True)
        command = [
            sys.executable, "-m", "tests.fakes.server",
            "--port", str(self._port),
            "--profile", self.profile,
            "--url-file", str(self._url_file),
            "--cache-dir", str(self.cache_dir),
            "--cache-max-documents", str(self.cache_max_documents),
            "--exit-with-parent",
        ]  # fmt: skip
        if self.json_response:
            command.append("--json-response")
        for host in self.also_hosts:
            command += ["--also-host", host]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        try:
            wait_for(
                self._announced_url,
                timeout=self.startup_timeout,
                message=f"fake server (log {self.log_path}) to listen",
            )
            self._port = httpx.URL(self.url).port or 0
            self._control = httpx.Client(base_url=self.origin, timeout=10.0)
            wait_for(self._healthy, timeout=self.startup_timeout, message="fake server health")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after ``timeout``) and reap it."""
        if self._control is not None:
            self._control.close()
            self._control = None
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)

    def restart(self) -> FakeServer:
        """Stop and start on the same port: every session and cached document is gone."""
        self.stop()
        return self.start()

    def _announced_url(self) -> str | None:
        if self._process is not None and self._process.poll() is not None:
            raise FakeServerError(
                f"fake server exited with {self._process.returncode}:\n{self._log_tail()}"
            )
        try:
            text = self._url_file.read_text().strip()
        except FileNotFoundError:
            return None
        self._url = text or None
        return self._url

    def _healthy(self) -> bool:
        try:
            return self._request("GET", "health").get("ok") is True
        except httpx.TransportError:
            return False

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    # --- control API ------------------------------------------------------------------------

    def configure(self, **knobs: Any) -> dict[str, Any]:
        """Change knobs (see tests.fakes.knobs.Knobs); returns all knobs now in force."""
        return self._request("POST", "configure", json=knobs)

    def reset(self) -> dict[str, Any]:
        """Start-up knobs again; counters, document cache and hanging calls cleared."""
        return self._request("POST", "reset")

    def knobs(self) -> dict[str, Any]:
        return self._request("GET", "knobs")

    def stats(self) -> dict[str, Any]:
        return self._request("GET", "stats")

    def forget_sessions(self) -> int:
        """End every session, like a restart: requests with an old session id get HTTP 404."""
        return int(self._request("POST", "forget-sessions")["forgotten"])

    def evict(self) -> int:
        """Empty the document cache; returns how many documents were dropped."""
        return int(self._request("POST", "evict")["evicted"])

    def _request(self, method: str, path: str, json: Any = None) -> dict[str, Any]:
        if self._control is None:
            raise FakeServerError("the fake server is not running")
        response = self._control.request(method, f"/_control/{path}", json=json)
        if response.status_code != 200:
            raise FakeServerError(
                f"{method} /_control/{path}: {response.status_code} {response.text}"
            )
        result: dict[str, Any] = response.json()
        return result

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self._url or "not started"
        return f"FakeServer({self.profile}, {where}, running={self.running})"
