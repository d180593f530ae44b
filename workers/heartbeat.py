"""A worker node's heartbeat: its own key in Redis, rewritten every few seconds.

``doclane stats``, the API and ``/metrics`` read the live workers from these keys in one round
trip (``pipeline.admin.heartbeats``) instead of a Celery inspect broadcast, which always waits
its whole timeout. A bootstep of the worker (the Celery main process) starts a thread when the
pool is up and stops it, deleting the key, when the worker stops; a worker killed outright lets
its key expire three beats later. The thread is a daemon: beats never hold up a shutdown.

A Redis that does not answer costs a warning (once, until it answers again), never the worker.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis
from celery import bootsteps
from celery.worker import state

from pipeline.admin.heartbeats import WorkerInfo, beat, stop_beating
from pipeline.resilience import load_resilience_settings
from pipeline.support.secrets import mask_address
from workers.settings import load_worker_settings

log = logging.getLogger("doclane.worker")


class Heartbeat(bootsteps.StartStopStep):
    """The worker blueprint's step that keeps the node's heartbeat."""

    # After the pool and the embedded beat have forked: a fork while this thread opens its
    # first connection (inside the C library's resolver) can leave the child holding a lock
    # no thread will release, and an embedded beat stuck that way sends no reconciler pass.
    requires = {"celery.worker.components:Pool", "celery.worker.components:Beat"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.thread: HeartbeatThread | None = None

    def start(self, parent: Any) -> None:
        resilience = load_resilience_settings()
        if not resilience.redis_url.strip():
            log.warning(
                "no DOCLANE_REDIS_URL: this worker sends no heartbeat (stats cannot see it)"
            )
            return
        self.thread = HeartbeatThread(
            redis.Redis.from_url(
                resilience.redis_url, socket_connect_timeout=1.0, socket_timeout=2.0
            ),
            namespace=resilience.breaker_namespace,
            node=parent.hostname,
            concurrency=int(parent.concurrency),
            queues=sorted(parent.app.amqp.queues.consume_from or ()),
            interval_s=load_worker_settings().worker_heartbeat_s,
            shown_url=mask_address(resilience.redis_url),
        )
        self.thread.start()

    def stop(self, parent: Any) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None

    shutdown = stop


class HeartbeatThread(threading.Thread):
    def __init__(
        self,
        client: redis.Redis,
        *,
        namespace: str,
        node: str,
        concurrency: int,
        queues: list[str],
        interval_s: float,
        shown_url: str,
    ) -> None:
        super().__init__(name="doclane-heartbeat", daemon=True)
        self.client = client
        self.namespace = namespace
        self.node = node
        self.concurrency = concurrency
        self.queues = queues
        self.interval_s = interval_s
        self.shown_url = shown_url
        self._stopped = threading.Event()
        self._failing = False

    def run(self) -> None:
        while True:
            self._beat()
            if self._stopped.wait(self.interval_s):
                return

    def stop(self) -> None:
        self._stopped.set()
        # A beat in flight would write the key again after it is deleted: let it end first
        # (a Redis round trip is bounded by the client's socket timeouts).
        self.join(timeout=5.0)
        try:
            stop_beating(self.client, self.namespace, self.node)
        except redis.RedisError as exc:
            log.warning("could not remove this worker's heartbeat: %s", exc)
        finally:
            self.client.close()

    def _beat(self) -> None:
        info = WorkerInfo(
            name=self.node,
            concurrency=self.concurrency,
            # Celery's own count of tasks this node accepted (what inspect's stats reported).
            tasks_done=sum(state.total_count.values()),
            queues=self.queues,
        )
        try:
            beat(self.client, self.namespace, info, self.interval_s)
        except redis.RedisError as exc:
            if not self._failing:
                log.warning("heartbeat not written to Redis at %s: %s", self.shown_url, exc)
            self._failing = True
        else:
            if self._failing:
                log.info("heartbeat written to Redis at %s again", self.shown_url)
            self._failing = False
