"""Container health checks for the worker and beat: ``python -m workers.healthcheck worker|beat``.

compose.yaml runs these inside the doclane image. A worker is healthy when its own Celery node
(``doclane-<pid>@<container hostname>``) answers a broadcast ping: that proves the process is
alive *and* still consuming from the broker, which a process check alone would not (a worker
that lost its broker connection keeps running while it reconnects). Beat has no control
channel to ping; it is healthy while the broker it sends the reconciler's passes to accepts a
connection.

Exit status 0 healthy, 1 not, with one line on stderr saying why.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from celery import Celery

from workers.app import create_app

#: Seconds to wait for ping replies and for the broker connection; a health check must be quick.
TIMEOUT_S = 5.0


def _app() -> Celery:
    """doclane's own app, not a bare one: the Redis transport options must be the workers'.

    Kombu's Redis transport stores exchange bindings joined by its ``sep`` option, which
    doclane sets to ``:``; a ping from an app with the default separator leaves a reply binding
    the worker cannot parse, and the worker's answer is lost.
    """
    return create_app()


def own_nodes(replies: Iterable[dict[str, Any]], hostname: str) -> list[str]:
    """Node names among ping replies that belong to this host (``doclane-<pid>@hostname``)."""
    return [node for reply in replies for node in reply if node.endswith(f"@{hostname}")]


def worker_healthy(app: Celery, hostname: str, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    """Ping only this host's nodes and stop at the first answer.

    A broadcast ping collects replies until its timeout, so a healthy worker's check took the
    whole 5 s (every compose interval, in every worker container), and every other worker of
    the fleet answered a ping that was not for it. The pattern is matched by each worker
    before it replies; one reply is enough.
    """
    replies = (
        app.control.ping(timeout=timeout, pattern=f"*@{hostname}", matcher="glob", limit=1) or []
    )
    mine = own_nodes(replies, hostname)
    if mine:
        return True, f"answered: {', '.join(mine)}"
    return False, f"no worker on {hostname} answered a ping within {timeout:g}s"


def broker_healthy(app: Celery, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:  # any failure to connect means unhealthy; say which
        return False, f"broker unreachable: {type(exc).__name__}: {exc}"
    return True, "broker reachable"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in (["worker"], ["beat"]):
        print("usage: python -m workers.healthcheck worker|beat", file=sys.stderr)
        return 2
    app = _app()
    try:
        if args == ["worker"]:
            ok, why = worker_healthy(app, socket.gethostname())
        else:
            ok, why = broker_healthy(app)
    finally:
        app.close()
    print(why, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
