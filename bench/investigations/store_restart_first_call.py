"""How long does the first store call wait after PostgreSQL restarts?

Fills the store's pool with ``--connections`` idle connections, restarts the machine's cluster
(``pg_ctlcluster ... restart``, which returns once the server accepts connections again), and
times the first borrow + ``SELECT 1``, with the pool's sweep on (as doclane runs) and off (the
plain check-on-borrow psycopg_pool offers). Each mode runs ``--rounds`` times.

    .venv/bin/python -m bench.investigations.store_restart_first_call
        [--connections 4] [--rounds 3] [--json]

It restarts the machine's PostgreSQL: every other client of the cluster loses its connections.
Run it on a quiet machine, never beside the test suite.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from contextlib import ExitStack

from bench.harness import print_json
from pipeline.settings.tree import read_settings
from pipeline.store.connection import RestartAwareCheck, create_pool


def restart_cluster() -> None:
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        timeout=120,
    )


def first_call_after_restart(connections: int, database_url: str) -> float:
    settings = read_settings(
        store=dict(
            database_url=database_url,
            pool_min_size=connections,
            pool_max_size=connections,
            pool_timeout_s=120.0,
        )
    ).store
    pool = create_pool(settings)
    try:
        with ExitStack() as held:  # all in use at once: that many idle connections afterwards
            for _ in range(connections):
                held.enter_context(pool.connection())
        restart_cluster()
        started = time.monotonic()
        with pool.connection() as conn:
            conn.execute("SELECT 1")
        return time.monotonic() - started
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "DOCLANE_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--json", action="store_true", help="the lines on stderr, JSON on stdout")
    args = parser.parse_args()
    sweep = RestartAwareCheck._sweep
    seconds: dict[str, list[float]] = {}
    for mode in ("sweep on", "sweep off"):
        RestartAwareCheck._sweep = sweep if mode == "sweep on" else (lambda self: None)  # type: ignore[method-assign]
        times = [
            first_call_after_restart(args.connections, args.database_url)
            for _ in range(args.rounds)
        ]
        seconds[mode] = times
        shown = ", ".join(f"{t:.3f}" for t in times)
        print(
            f"{mode}: first call after a restart, {args.connections} idle connections: {shown} s",
            file=sys.stderr if args.json else sys.stdout,
        )
    RestartAwareCheck._sweep = sweep  # type: ignore[method-assign]
    if args.json:
        print_json({"connections": args.connections, "first_call_s": seconds})


if __name__ == "__main__":
    main()
