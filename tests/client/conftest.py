"""A real fleet for the client's tests: ``doclane api``, a worker and the fake MCP server.

``fleet`` runs them on the test's own database and Redis broker (tests/fixtures: the processes
every other end-to-end test runs) with a token per role, and hands out clients:
``fleet.client()`` (admin), ``fleet.client("read")``, ``fleet.async_client()``. The worker starts
when a test asks (``fleet.start_worker()``), so a test can hold jobs queued. The API listens on
a port of its own choosing once, and keeps it across ``fleet.restart_api()``: a client in the
middle of a wait sees the same address go away and come back. Polls and retries in the clients
are short (``FAST``), so a test waits on the jobs, not on the client's backoff.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.brokers import Broker
from tests.fixtures.docling_server import free_port
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.workers import Cluster
from tests.support.client_fleet import Fleet

ROLES = ("read", "submit", "admin")


@pytest.fixture
def fleet_env() -> dict[str, str]:
    """Extra environment for the fleet's API and worker (a test overrides it to change one)."""
    return {}


@pytest.fixture
def fleet(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
    fleet_env: dict[str, str],
) -> Iterator[Fleet]:
    cluster = make_cluster(redis_broker, fake_server.url, **fleet_env)
    if "DOCLING_MCP_COMMAND" in fleet_env:  # a stdio child is the server: no origin
        del cluster.env["DOCLING_MCP_ORIGIN"]
    tokens = {role: secrets.token_urlsafe(16) for role in ROLES}
    listed = ",".join(f"{role}-client:{role}:{token}" for role, token in tokens.items())
    api_env = {
        **cluster.env,
        "DOCLANE_API_TOKEN": secrets.token_urlsafe(16),
        "DOCLANE_API_TOKENS": listed,
        "DOCLANE_INSPECT_TIMEOUT_S": "0.3",
    }
    folder = tmp_path / "documents"
    folder.mkdir()
    fleet = Fleet(cluster, fake_server, tokens, folder, free_port(), api_env)
    fleet.start_api()
    yield fleet
    for api in fleet.apis:
        api.stop()
