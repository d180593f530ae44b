"""The services a bench runs against: docling-mcp, the fake server, a database, a broker.

Each is started fresh and stopped (or dropped, or released) by the bench: a bench shares the
machine with test sessions and other benches, so its database is a scratch one and its Redis
database is claimed exactly as the test suite claims its brokers (tests/support/brokers.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench.harness.paths import DOCLING_MCP_BIN
from bench.harness.processes import free_port, port_open, stop_group
from tests.support.brokers import CANDIDATE_DBS, Broker, claim_redis_broker
from tests.support.fake_server import FakeServer

__all__ = ["ADMIN_DB_URL", "Broker", "DoclingServer", "FakeServer", "claim_redis_db"]

#: The database a scratch database is created from (and dropped through).
ADMIN_DB_URL = os.environ.get(
    "DOCLANE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


class DoclingServer:
    """One docling-mcp, started as scripts/lib.sh's ``start_docling_mcp`` does, cache empty."""

    def __init__(
        self,
        work: Path,
        cache_documents: int,
        extra_env: Mapping[str, str] | None = None,
        *,
        binary: str = DOCLING_MCP_BIN,
    ) -> None:
        self.work = work
        self.cache_documents = cache_documents
        self.extra_env = dict(extra_env or {})  # e.g. remote mode (bench/topologies.py)
        self.binary = binary  # another server speaking docling-mcp's tools and options
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.cache_dir = work / "cache"

    def start(self) -> None:
        if self.cache_dir.exists():
            shutil.rmtree(self.cache_dir)
        self.cache_dir.mkdir(parents=True)
        port = free_port()
        env = {
            **os.environ,
            "DOCLING_MCP_CONVERSION_MODE": "local",
            "CACHE_DIR": str(self.cache_dir),
            "HF_HUB_OFFLINE": "1",
            "DOCLING_MCP_CACHE_MAX_DOCUMENTS": str(self.cache_documents),
            **self.extra_env,
        }
        self.work.mkdir(parents=True, exist_ok=True)
        with open(self.work / "server.log", "ab") as logfile:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    "--transport",
                    "streamable-http",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                cwd=self.work,
                env=env,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while not port_open(port):
            if self.proc.poll() is not None:
                raise SystemExit(f"docling-mcp exited at start (log: {self.work / 'server.log'})")
            if time.monotonic() > deadline:
                raise SystemExit("docling-mcp did not listen within 120 s")
            time.sleep(0.2)
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            stop_group(proc, 20)


@contextlib.contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A database of its own, migrated by ``doclane db migrate``, dropped afterwards."""
    params = conninfo_to_dict(ADMIN_DB_URL)
    with psycopg.connect(ADMIN_DB_URL, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo("", **{**params, "dbname": name})
    try:
        yield url
    finally:
        with psycopg.connect(ADMIN_DB_URL, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def claim_redis_db() -> Broker:
    """A Redis database claimed the way the test suite claims its brokers (a lock key in it).

    The machine is shared: a test session that finds a database empty takes it, and its
    workers would then consume this bench's messages (jobs left waiting until the reconciler
    republishes them, 300 s later). Honouring the same claim keeps both sides apart.
    """
    broker = claim_redis_broker()
    if broker is None:
        raise SystemExit(f"no free Redis database among {list(CANDIDATE_DBS)} for the bench")
    return broker
