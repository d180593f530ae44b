"""A PostgreSQL primary and its synchronous standby of the test's own, to fail over.

Two clusters beside the machine's (which is never touched): ``initdb`` in a temporary folder,
``pg_basebackup -R`` for the standby, ``synchronous_standby_names`` on the primary so that a
commit returns only once the standby has it. :meth:`ReplicaPair.fail_over` stops the primary
at once (``-m immediate``: a crash, no checkpoint) and promotes the standby, as a managed
database's failover does. Both run as the ``postgres`` user (initdb refuses root) on ports the
kernel picked, listening on loopback only; ``close`` stops them and removes the folder.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from tests.fixtures.waiting import wait_for

BIN = Path("/usr/lib/postgresql")
STANDBY_NAME = "doclane_standby"


def pg_bin(tool: str) -> str:
    found = sorted(BIN.glob(f"*/bin/{tool}"))
    if not found:
        raise RuntimeError(f"no {tool} under {BIN} (apt-get install postgresql)")
    return str(found[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def as_postgres(*command: str) -> None:
    subprocess.run(["runuser", "-u", "postgres", "--", *command], check=True, capture_output=True,
                   timeout=120)  # fmt: skip


class Instance:
    def __init__(self, folder: Path, port: int) -> None:
        self.folder, self.port = folder, port

    def url(self, dbname: str = "postgres") -> str:
        return make_conninfo(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname)

    def start(self) -> None:
        as_postgres(pg_bin("pg_ctl"), "-D", str(self.folder), "-l", f"{self.folder}/log", "-w",
                    "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            as_postgres(pg_bin("pg_ctl"), "-D", str(self.folder), "-m", mode, "-w", "stop")

    def query(self, sql: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql)
            return list(cursor.fetchall()) if cursor.description else []


class ReplicaPair:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="doclane-replicas-"))
        shutil.chown(self.root, "postgres")
        self.primary = Instance(self.root / "primary", free_port())
        self.standby = Instance(self.root / "standby", free_port())
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        primary, standby = self.primary, self.standby
        as_postgres(pg_bin("initdb"), "-D", str(primary.folder), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8", "--no-sync")  # fmt: skip
        settings = (
            f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{primary.folder}'\nfsync = off\n"
            "shared_buffers = 16MB\nmax_connections = 60\n"
            f"synchronous_standby_names = '{STANDBY_NAME}'\n"
        )
        with (primary.folder / "postgresql.conf").open("a") as conf:
            conf.write(settings)
        primary.start()
        as_postgres(
            pg_bin("pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(standby.folder),
            "-X",
            "stream",
            "-R",
            "--no-sync",
        )
        with (standby.folder / "postgresql.auto.conf").open("a") as conf:
            conf.write(
                f"port = {standby.port}\nunix_socket_directories = '{standby.folder}'\n"
                # Promoted, it has no standby of its own: it must not wait for one.
                "synchronous_standby_names = ''\n"
                f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user=postgres "
                f"application_name={STANDBY_NAME}'\n"
            )
        standby.start()
        wait_for(
            lambda: primary.query("SELECT sync_state FROM pg_stat_replication") == [("sync",)],
            timeout=60,
            interval=0.2,
            message="the standby replicating synchronously",
        )

    def url(self, dbname: str) -> str:
        """Both, the writable one wherever it is (libpq tries them in order)."""
        return make_conninfo(
            host="127.0.0.1,127.0.0.1",
            port=f"{self.primary.port},{self.standby.port}",
            user="postgres",
            dbname=dbname,
            target_session_attrs="read-write",
        )

    def fail_over(self) -> None:
        self.primary.stop("immediate")
        as_postgres(pg_bin("pg_ctl"), "-D", str(self.standby.folder), "-w", "promote")

    def close(self) -> None:
        for instance in (self.standby, self.primary):
            if (instance.folder / "postmaster.pid").exists():
                instance.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
