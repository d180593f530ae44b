"""A real fleet for the client's tests: ``doclane api``, a worker and the fake MCP server.

``fleet`` starts them on the test's own database and Redis broker (tests/fixtures: the same
processes every other end-to-end test runs) with a token per role, and hands out clients:
``fleet.client()`` (admin), ``fleet.client("read")``, ``fleet.async_client()``. Waits in the
clients are short (``FAST``), so a test that waits for a job waits on the job, not on a poll.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from doclane_client import AsyncClient, Client, Polling, RetryPolicy

from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.workers import Cluster

ROLES = ("read", "submit", "admin")
#: Polls and retries for tests: quick, and still bounded.
FAST = {
    "polling": Polling(initial_s=0.05, factor=1.5, max_s=0.5),
    "retries": RetryPolicy(attempts=6, total_s=60, initial_s=0.05, max_wait_s=1.0),
}


@dataclass
class Fleet:
    cluster: Cluster
    api: ApiServer
    server: FakeServer
    tokens: dict[str, str]
    folder: Path
    start_api: Callable[[], ApiServer] = field(repr=False)

    @property
    def url(self) -> str:
        return self.api.url

    def client(self, role: str = "admin", **options: Any) -> Client:
        return Client(self.url, self.tokens.get(role, role), **{**FAST, **options})

    def async_client(self, role: str = "admin", **options: Any) -> AsyncClient:
        return AsyncClient(self.url, self.tokens.get(role, role), **{**FAST, **options})

    def document(self, name: str, text: str | None = None) -> Path:
        """A markdown document of its own (its text unique, so dedup never merges two)."""
        path = self.folder / name
        path.write_text(text if text is not None else f"# {name}\n\nAbout {name}.\n")
        return path


@pytest.fixture
def fleet(
    make_cluster: Callable[..., Cluster],
    make_api_server: Callable[..., ApiServer],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> Fleet:
    cluster = make_cluster(redis_broker, fake_server.url)
    cluster.start_worker(concurrency=2, beat=False)
    tokens = {role: secrets.token_urlsafe(16) for role in ROLES}
    listed = ",".join(f"{role}-client:{role}:{token}" for role, token in tokens.items())

    def start_api() -> ApiServer:
        return make_api_server(cluster.env, DOCLANE_API_TOKENS=listed)

    folder = tmp_path / "documents"
    folder.mkdir()
    return Fleet(cluster, start_api(), fake_server, tokens, folder, start_api)
