"""Services of a bench's own, which it may restart: a Redis server and a PostgreSQL cluster.

The machine's PostgreSQL and Redis are shared with every test session and every engineer on
it; a bench that restarts a service (the soak) runs its own, on free ports, in its scratch
folder, and removes it afterwards. PostgreSQL refuses to run as root: the cluster is made and
run by the ``postgres`` user when the bench runs as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg

from bench.harness.processes import free_port, port_open, stop_group

_START_TIMEOUT_S = 60.0


def _wait_port(port: int, what: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not port_open(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not listen on port {port}")
        time.sleep(0.1)


class PrivateRedis:
    """``redis-server`` on a free port, without persistence: a restart loses every message, the
    harshest case for the pipeline (the reconciler must republish from the database)."""

    def __init__(self, scratch: Path) -> None:
        self.port = free_port()
        self.log = scratch / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        with open(self.log, "ab") as out:
            self._proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        _wait_port(self.port, "redis-server")
        return self

    def stop(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            stop_group(proc, 10)

    def restart(self) -> None:
        self.stop()
        self.start()


class PrivatePostgres:
    """A PostgreSQL cluster of its own (``initdb`` into the scratch folder), one database
    ``doclane`` in it; ``restart`` is ``pg_ctl restart -m fast``, every connection cut."""

    def __init__(self, scratch: Path) -> None:
        self.port = free_port()
        self.data = scratch / "pgdata"
        self.log = scratch / "postgres.log"
        self._as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/doclane"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        subprocess.run([*prefix, *command], check=True, capture_output=True)

    def start(self) -> PrivatePostgres:
        self.data.mkdir(parents=True)
        self.log.touch()
        if self._as_postgres:
            shutil.chown(self.data, "postgres", "postgres")
            shutil.chown(self.log, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._pg_ctl("start")
        with psycopg.connect(self.url.replace("/doclane", "/postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE doclane")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", action)
        if action != "stop":
            _wait_port(self.port, "postgres")

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg_ctl("stop", "-m", "fast")
