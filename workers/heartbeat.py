"""A worker node's heartbeat: its own key in Redis, rewritten every few seconds.

``doclane stats``, the API and ``/metrics`` read the live workers from these keys in one round
trip (``pipeline.admin.heartbeats``) instead of a Celery inspect broadcast, which always waits
its whole timeout. A bootstep of the worker (the Celery main process) starts a thread when the
pool is up and stops it, deleting the key, when the worker stops; a worker killed outright lets
its key expire three beats later. The thread is a daemon: beats never hold up a shutdown.

A Redis that does not answer costs a warning (once, until it answers again), never the worker.

Each beat also carries the messages waiting in every queue, counted just before it, and how long
before (``pipeline.admin.heartbeats``): ``doclane stats`` shows those instead of loading a broker
client to ask (a tenth of a second of its start). The counting has a thread of its own, so that
a broker that is slow or down holds a beat up for a second at most; the beat then carries the
last count, unless it is older than :data:`COUNT_MAX_AGE_BEATS` beats, and readers ask the
broker themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from celery import bootsteps
from celery.worker import state

from pipeline.admin.fleet import Fleet
from pipeline.admin.heartbeats import WorkerInfo, beat, stop_beating
from pipeline.support.secrets import mask_address
from workers.fleet import BrokerFleet
from workers.settings import settings_of

log = logging.getLogger("doclane.worker")

#: Beats a count may be old and still be sent: older, the broker is not being counted (down, or
#: slow to answer), and readers had better ask it themselves.
COUNT_MAX_AGE_BEATS = 2
#: Seconds a beat waits for the count it asks for (half a beat at most); past that it carries
#: the last count, if young enough, and the count it asked for goes with the next beat.
_COUNT_WAIT_S = 1.0


class Heartbeat(bootsteps.StartStopStep):
    """The worker blueprint's step that keeps the node's heartbeat."""

    # After the pool and the embedded beat have forked: a fork while this thread opens its
    # first connection (inside the C library's resolver) can leave the child holding a lock
    # no thread will release, and an embedded beat stuck that way sends no reconciler pass.
    requires = {"celery.worker.components:Pool", "celery.worker.components:Beat"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.thread: HeartbeatThread | None = None
        self.counter: DepthCounter | None = None

    def start(self, parent: Any) -> None:
        tree = settings_of(parent.app)
        resilience = tree.resilience
        if not resilience.redis_url.strip():
            log.warning(
                "no DOCLANE_REDIS_URL: this worker sends no heartbeat (stats cannot see it)"
            )
            return
        settings = tree.worker
        self.counter = DepthCounter(
            BrokerFleet(settings.broker_url), shown_url=mask_address(settings.broker_url)
        )
        self.thread = HeartbeatThread(
            redis.Redis.from_url(
                resilience.redis_url, socket_connect_timeout=1.0, socket_timeout=2.0
            ),
            namespace=resilience.breaker_namespace,
            node=parent.hostname,
            concurrency=int(parent.concurrency),
            queues=sorted(parent.app.amqp.queues.consume_from or ()),
            interval_s=settings.worker_heartbeat_s,
            shown_url=mask_address(resilience.redis_url),
            counter=self.counter,
        )
        self.counter.start()
        self.thread.start()

    def stop(self, parent: Any) -> None:
        if self.counter is not None:
            self.counter.stop()
            self.counter = None
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
        counter: DepthCounter | None = None,
    ) -> None:
        super().__init__(name="doclane-heartbeat", daemon=True)
        self.client = client
        self.namespace = namespace
        self.node = node
        self.concurrency = concurrency
        self.queues = queues
        self.interval_s = interval_s
        self.shown_url = shown_url
        self.counter = counter
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
        depths, age_s = None, 0.0
        if self.counter is not None:
            latest = self.counter.count(
                wait_s=min(_COUNT_WAIT_S, self.interval_s / 2),
                max_age_s=self.interval_s * COUNT_MAX_AGE_BEATS,
            )
            depths, age_s = latest if latest is not None else (None, 0.0)
        try:
            beat(
                self.client,
                self.namespace,
                info,
                self.interval_s,
                depths=depths,
                depths_age_s=age_s,
            )
        except redis.RedisError as exc:
            if not self._failing:
                log.warning("heartbeat not written to Redis at %s: %s", self.shown_url, exc)
            self._failing = True
        else:
            if self._failing:
                log.info("heartbeat written to Redis at %s again", self.shown_url)
            self._failing = False


class DepthCounter(threading.Thread):
    """Counts the messages waiting in every queue when a beat asks (:meth:`count`), in a thread
    of its own so that a beat waits for a slow broker only so long. A daemon: a count in
    flight never holds up a shutdown."""

    def __init__(self, fleet: Fleet, *, shown_url: str) -> None:
        super().__init__(name="doclane-queue-counter", daemon=True)
        self.fleet = fleet
        self.shown_url = shown_url
        self._asked = threading.Event()
        self._stopped = False
        self._done = threading.Condition()
        self._tried_at = float("-inf")  # monotonic start of the last count, answered or not
        self._latest: tuple[dict[str, int], float] | None = None  # the counts, their start
        self._failing = False

    def run(self) -> None:
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._stopped:
                return
            self._count()

    def stop(self) -> None:
        self._stopped = True
        self._asked.set()

    def count(self, *, wait_s: float, max_age_s: float) -> tuple[dict[str, int], float] | None:
        """A count begun now, waited for ``wait_s`` at most, and its age in seconds; else the
        last one if it is at most ``max_age_s`` old; else None."""
        asked = time.monotonic()
        self._asked.set()
        with self._done:
            self._done.wait_for(lambda: self._tried_at >= asked, timeout=wait_s)
            latest = self._latest
        if latest is None:
            return None
        age_s = time.monotonic() - latest[1]
        return (latest[0], round(age_s, 3)) if age_s <= max_age_s else None

    def _count(self) -> None:
        started = time.monotonic()  # a count's age runs from its first question
        try:
            depths = self.fleet.queue_depths()
        except Exception as exc:  # the broker down or refusing: the worker goes on regardless
            if not self._failing:
                log.warning("queue depths not counted at %s: %s", self.shown_url, exc)
            self._failing = True
            with self._done:
                self._tried_at = started
                self._done.notify_all()
            return
        with self._done:
            self._latest = ({d.queue: d.waiting for d in depths}, started)
            self._tried_at = started
            self._done.notify_all()
        if self._failing:
            log.info("queue depths counted at %s again", self.shown_url)
        self._failing = False
