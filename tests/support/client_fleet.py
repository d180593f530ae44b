"""The fleet the Python client's tests run against, and the recording of its requests."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from time import monotonic
from typing import Any

import httpx
from doclane_client import (
    AsyncClient,
    Client,
    Polling,
    RetryPolicy,
)

from tests.fixtures.api_server import ApiServer
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster, WorkerProcess

#: Polls and retries for tests: quick, and still bounded.
FAST: dict[str, Any] = {
    "polling": Polling(initial_s=0.05, factor=1.5, max_s=0.5),
    "retries": RetryPolicy(attempts=40, total_s=60, initial_s=0.05, max_wait_s=1.0),
}


@dataclass
class Fleet:
    cluster: Cluster
    server: FakeServer
    tokens: dict[str, str]
    folder: Path
    port: int
    api_env: dict[str, str]
    apis: list[ApiServer] = field(default_factory=list)

    @property
    def api(self) -> ApiServer:
        return self.apis[-1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, role: str = "admin", **options: Any) -> Client:
        return Client(self.url, self.tokens.get(role, role), **{**FAST, **options})

    def async_client(self, role: str = "admin", **options: Any) -> AsyncClient:
        return AsyncClient(self.url, self.tokens.get(role, role), **{**FAST, **options})

    def start_worker(self) -> WorkerProcess:
        return self.cluster.start_worker(concurrency=2, beat=False)

    def start_api(self) -> ApiServer:
        self.apis.append(api_on_port(self.api_env, self.folder.parent, len(self.apis), self.port))
        return self.api

    def restart_api(self) -> ApiServer:
        self.api.stop()
        return self.start_api()

    def document(self, name: str, text: str | None = None) -> Path:
        """A markdown document of its own (its text unique, so dedup never merges two)."""
        path = self.folder / name
        path.write_text(text if text is not None else f"# {name}\n\nAbout {name}.\n")
        return path


class Recording(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """httpx's own transports (blocking and async), with each request and what became of it
    written down; for the answers the API cannot be made to give here, some made up in front
    of it (``made_up``, answered first, in order)."""

    def __init__(self, made_up: list[httpx.Response] | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.inner_async = httpx.AsyncHTTPTransport()
        self.made_up = list(made_up or [])
        #: (method, path, status or the transport error's name, time.monotonic() at the answer)
        self.log: list[tuple[str, str, int | str, float]] = []

    def _made_up(self, request: httpx.Request) -> httpx.Response | None:
        if not self.made_up:
            return None
        answer = self.made_up.pop(0)
        self._note(request, answer.status_code)
        return answer

    def _note(self, request: httpx.Request, outcome: int | str) -> None:
        self.log.append((request.method, request.url.path, outcome, monotonic()))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self._made_up(request)
        if answer is not None:
            return answer
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError as exc:
            self._note(request, type(exc).__name__)
            raise
        self._note(request, response.status_code)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = self._made_up(request)
        if answer is not None:
            return answer
        try:
            response = await self.inner_async.handle_async_request(request)
        except httpx.TransportError as exc:
            self._note(request, type(exc).__name__)
            raise
        self._note(request, response.status_code)
        return response

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner_async.aclose()


def _error(status: int, code: str, **headers: str) -> httpx.Response:
    body = {"error": {"code": code, "title": code, "message": f"made up {status}",
                      "action": "", "retryable": status >= 500, "detail": None}}  # fmt: skip
    return httpx.Response(status, json=body, headers=headers)


def api_on_port(env: dict[str, str], folder: Path, number: int, port: int) -> ApiServer:
    """``doclane api`` on ``port`` (tests/fixtures/api_server.py starts it on port 0; a restart
    must come back at the same address)."""
    log_path = folder / f"api-{number}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline.cli",
                "api",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ApiServer(popen, log_path, env["DOCLANE_API_TOKEN"])
    try:
        server.url = wait_for(server.listening, timeout=60, message="doclane api listening")
    except BaseException:
        server.stop()
        raise
    return server
