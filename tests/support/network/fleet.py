"""A fleet across hosts: worker hosts and an API host, each a namespace, reaching PostgreSQL,
the broker, Redis and the MCP servers only through the forwarders on the services address.

The test itself stands beside the services (on loopback): it submits, reads the database and
drives the fake servers directly, as an operator's box would; everything doclane runs is on a
host, so every fault made on a host's link is one doclane meets.

    fleet = make_fleet(servers=[fake_server])
    a, b = fleet.add_host(), fleet.add_host()
    fleet.start_worker(a); fleet.start_worker(b)
    a.cut(fleet.database.port)              # host a loses PostgreSQL (a black hole)
    a.heal()
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

from psycopg.conninfo import make_conninfo

from pipeline.jobs.model import EventKind, Job, JobEvent, JobState
from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import REDIS_PORT, Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster, WorkerProcess
from tests.support.network.forwarder import Forward, Forwarders
from tests.support.network.hosts import Host, Network

#: The MCP tools that convert (a result's conversion is counted from their calls).
CONVERT_TOOLS = frozenset(
    {"convert_document_into_docling_document", "convert_directory_files_into_docling_document"}
)


def via(url: str, address: str, port: int) -> str:
    """``url`` (http or redis) with its host and port replaced."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{address}:{port}"))


@dataclass
class Fleet:
    network: Network
    forwarders: Forwarders
    database: Forward
    broker: Forward
    redis: Forward
    servers: list[Forward]
    #: The fake MCP servers themselves (their knobs), in the order of ``servers``.
    fakes: list[FakeServer]
    #: What the hosts are told (the services address); the test's own store is on loopback.
    env: dict[str, str]
    make_cluster: Callable[..., Cluster]
    broker_handle: Broker
    #: The database on loopback, as the test reaches it.
    database_url: str = ""
    #: Every server's forwarder when the connection string names several (``database`` first).
    databases: list[Forward] = field(default_factory=list)
    cluster: Cluster | None = None
    apis: list[ApiServer] = field(default_factory=list)

    @property
    def hosts(self) -> list[Host]:
        return self.network.hosts

    def add_host(self) -> Host:
        return self.network.add_host()

    def origin_of(self, server: Forward) -> str:
        return f"http://{self.network.services_address}:{server.port}"

    def start_worker(self, host: Host, **options: Any) -> WorkerProcess:
        assert self.cluster is not None
        return self.cluster.start_worker(launcher=host.exec_prefix(), **options)

    def start_api(self, host: Host, folder: Any, **extra: str) -> ApiServer:
        """``doclane api`` inside ``host``, on its address; the test reaches it from outside."""
        log_path = folder / f"api-{len(self.apis) + 1}.log"
        token = secrets.token_urlsafe(16)
        environment = {**self.env, "DOCLANE_API_TOKEN": token, "PYTHONUNBUFFERED": "1", **extra}
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                [*host.exec_prefix(), sys.executable, "-m", "pipeline.cli", "api",
                 "--host", host.address, "--port", "0"],
                cwd=folder, env=environment, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        server = ApiServer(popen, log_path, token)
        self.apis.append(server)
        server.url = wait_for(server.listening, timeout=60, message="doclane api listening")
        return server

    def close(self) -> None:
        for api in self.apis:
            api.stop()
        for fake in self.fakes:  # a call a failed test left hanging would hold a warm shutdown
            with contextlib.suppress(Exception):
                fake.reset()
        if self.cluster is not None:
            self.cluster.close()
        self.forwarders.close()
        self.network.close()


def build_fleet(
    network: Network,
    *,
    database_url: str,
    broker: Broker,
    servers: Sequence[FakeServer],
    make_cluster: Callable[..., Cluster],
    **env: str,
) -> Fleet:
    forwarders = Forwarders(network.services_address)
    # One forwarder per server of the connection string (a multi-host one: the primary and its
    # standby), so that the hosts' string names the same servers, each behind its forwarder.
    pg_ports = [int(p) for p in _conninfo_port(database_url).split(",")]
    try:
        databases = [forwarders.add(f"postgresql-{n}", port) for n, port in enumerate(pg_ports)]
        database = databases[0]
        broker_fwd = forwarders.add("broker", urlsplit(broker.url).port or REDIS_PORT)
        redis_fwd = forwarders.add("redis", REDIS_PORT)
        server_fwds = [forwarders.add(f"mcp-{n}", s.port) for n, s in enumerate(servers)]
    except BaseException:
        forwarders.close()
        raise
    address = network.services_address
    origins = ",".join(
        via(s.url, address, f.port) for s, f in zip(servers, server_fwds, strict=True)
    )
    redis_db = os.environ.get("DOCLANE_TEST_BREAKER_REDIS_DB", "0")
    hosts_env = {
        "DOCLANE_DATABASE_URL": make_conninfo(
            database_url,
            host=",".join([address] * len(databases)),
            port=",".join(str(d.port) for d in databases),
        ),
        "DOCLANE_BROKER_URL": via(broker.url, address, broker_fwd.port),
        "DOCLANE_REDIS_URL": f"redis://{address}:{redis_fwd.port}/{redis_db}",
        "DOCLING_MCP_ORIGIN": origins,
        **env,
    }
    fleet = Fleet(
        network, forwarders, database, broker_fwd, redis_fwd, server_fwds, list(servers), {},
        make_cluster, broker,
    )  # fmt: skip
    fleet.database_url = database_url
    fleet.databases = databases
    fleet.cluster = make_cluster(broker, origins, **hosts_env)
    fleet.env = fleet.cluster.env
    return fleet


def _conninfo_port(conninfo: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    return str(conninfo_to_dict(conninfo).get("port") or 5432)


# ---- what every scenario ends with ---------------------------------------------------------
@dataclass
class Figures:
    """A scenario's figures: what docs/benchmarks.md's table of faults between hosts shows."""

    scenario: str
    jobs: int
    lost: int
    doubled: int
    repeated: int
    heal_to_rate_s: float | None

    def row(self) -> str:
        rate = "-" if self.heal_to_rate_s is None else f"{self.heal_to_rate_s:.1f}"
        return (
            f"| {self.scenario} | {self.jobs} | {self.lost} | {self.doubled} | {self.repeated} "
            f"| {rate} |"
        )


def settle(cluster: Cluster, job_ids: Sequence[UUID], *, timeout: float = 120.0) -> list[Job]:
    return cluster.wait_terminal(job_ids, timeout=timeout)


def figures(
    scenario: str,
    cluster: Cluster,
    job_ids: Sequence[UUID],
    *,
    heal_to_rate_s: float | None = None,
    cancelled: frozenset[UUID] = frozenset(),
) -> Figures:
    """Check what every scenario must end with, and count it.

    Every job final; a job not cancelled succeeded, with exactly one result set, from the
    attempt that succeeded, and exactly one ``succeeded`` transition; a cancelled job has no
    result. ``repeated`` counts the successful conversions beyond one per job (at-least-once:
    an attempt that lost its lease may have converted before the fence refused it).
    """
    jobs = cluster.store.reads.get_jobs(job_ids)
    assert len(jobs) == len(job_ids)
    lost = doubled = repeated = 0
    for job in jobs:
        assert job.state.terminal, (job.id, job.state)
        results = cluster.store.reads.list_results(job.id)
        events = cluster.store.reads.events(job.id)
        succeeded = [e for e in events if e.to_state is JobState.SUCCEEDED]
        if job.id in cancelled or job.state is JobState.CANCELLED:
            assert not results and not succeeded, f"{job.id}: a cancelled job has results"
            continue
        if job.state is not JobState.SUCCEEDED or not results:
            lost += 1
            continue
        if len(succeeded) > 1 or {r.attempt for r in results} != {job.attempt}:
            doubled += 1
        if sorted(r.format for r in results) != sorted(job.formats):
            doubled += 1
        converts = [
            e
            for e in events
            if e.kind is EventKind.MCP_CALL and e.outcome == "ok" and e.tool in CONVERT_TOOLS
        ]
        repeated += max(0, len(converts) - 1)
    return Figures(scenario, len(jobs), lost, doubled, repeated, heal_to_rate_s)


def pool_pid(worker: str) -> int:
    """The pool process in a lease owner or an event's ``worker`` (``node:pid``)."""
    return int(worker.rsplit(":", 1)[1])


def changes_to(events: Sequence[JobEvent], state: JobState) -> list[JobEvent]:
    """A job's changes of state into ``state``, oldest first (each with its attempt)."""
    return [e for e in events if e.kind is EventKind.STATE_CHANGE and e.to_state is state]


def succeeded_in(cluster: Cluster, job_ids: Sequence[UUID]) -> set[int]:
    """The pool processes whose attempts stored these jobs' results, by the database's own
    record (the ``succeeded`` change names the attempt's worker), not by what is running now."""
    return {
        pool_pid((event.detail or {})["worker"])
        for job_id in job_ids
        for event in changes_to(cluster.store.reads.events(job_id), JobState.SUCCEEDED)
    }


def write_figures(row: Figures) -> None:
    """Append the row to ``$DOCLANE_NETWORK_FIGURES`` when set (the lead's measured run)."""
    target = os.environ.get("DOCLANE_NETWORK_FIGURES")
    if target:
        with open(target, "a") as out:
            out.write(row.row() + "\n")
