"""Fixtures of the hosts harness: ``make_fleet`` builds a fleet of namespaces (tests/network/).

Every module here marks its tests ``network`` (``-m network`` runs them alone). Where the
kernel refuses network namespaces (or nftables in them), the tests skip and say why; anywhere
else a failure to build the hosts is a failure. Whatever a test made (namespaces, veths,
forwarders, processes) is removed when it ends, passed or failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServerFactory
from tests.fixtures.workers import Cluster, new_cluster
from tests.support.network.fleet import Fleet, build_fleet
from tests.support.network.hosts import Network, namespaces_refused


@pytest.fixture(scope="session")
def _namespaces_allowed() -> None:
    why = namespaces_refused()
    if why is not None:
        pytest.skip(f"no hosts harness here: {why}")


@pytest.fixture
def make_fleet(
    _namespaces_allowed: None,
    migrated_database_url: str,
    redis_broker: Broker,
    make_cluster: Callable[..., Cluster],
    fake_server_factory: FakeServerFactory,
    tmp_path: Path,
) -> Iterator[Callable[..., Fleet]]:
    """``make_fleet(servers=2, database_url=..., **env)``: a fleet with no host yet, and that
    many fake MCP servers (admitting the services address as their Host). ``database_url``: a
    database of the test's own (migrated) instead of the test's scratch one."""
    fleets: list[Fleet] = []
    stores: list[JobStore] = []

    def own_database(url: str) -> Callable[..., Cluster]:
        def cluster(broker: Broker, origins: str, **env: str) -> Cluster:
            settings = read_settings(store=dict(database_url=url, pool_timeout_s=10.0)).store
            stores.append(JobStore(settings))
            workdir = tmp_path / f"fleet-{len(stores)}"
            workdir.mkdir()
            return new_cluster(broker, origins, url, stores[-1], workdir, env)

        return cluster

    def build(*, servers: int = 1, database_url: str | None = None, **env: Any) -> Fleet:
        network = Network()
        try:
            servers_made = [
                fake_server_factory(also_hosts=(network.services_address,)) for _ in range(servers)
            ]
            fleet = build_fleet(
                network,
                database_url=database_url or migrated_database_url,
                broker=redis_broker,
                servers=servers_made,
                make_cluster=make_cluster if database_url is None else own_database(database_url),
                **env,
            )
        except BaseException:
            network.close()
            raise
        fleets.append(fleet)
        return fleet

    yield build
    for fleet in fleets:
        fleet.close()
    for store in stores:
        store.close()
