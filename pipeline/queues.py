"""The queues: size tiers, the queue each tier's jobs go to, the control queue, the message
priority levels, and the publisher port through which the library wakes a worker without
knowing Celery.

A 300-page PDF must neither starve small documents on a shared queue nor be cut off by a timeout
meant for a one-page memo, so the queue a job goes to (``doclane.small|medium|large``), the
worker's Celery time limits and the MCP client's call timeouts all pick their tier here. This
module imports only the standard library, so that every layer can import it without cycles.

PostgreSQL is the queue; a broker message only rings the bell (:class:`Wakeup`): "drain this
queue". Every wake-up is rung here (:func:`ring`, :func:`bells_for`, :func:`wake`).
``workers/`` implements :class:`Publisher` with Celery and the CLI (the composition root)
wires it in. A publisher may fail (the broker is down): the jobs are already committed, stay
queued, and the reconciler rings for them within an interval, so callers log it and go on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

log = logging.getLogger("doclane.wakeups")

SizeTier = Literal["small", "medium", "large"]

#: Every tier, smallest first.
SIZE_TIERS: Final[tuple[SizeTier, ...]] = ("small", "medium", "large")

MIB: Final = 1024 * 1024
#: Below this many bytes a document is ``small`` (10 MiB).
SMALL_BELOW_BYTES: Final = 10 * MIB
#: Below this many bytes (and not small) a document is ``medium`` (50 MiB); the rest is ``large``.
MEDIUM_BELOW_BYTES: Final = 50 * MIB


def size_tier(size_bytes: int | None) -> SizeTier:
    """The tier of a document of ``size_bytes``; an unknown size (a URL not yet fetched) is large.

    Unknown means "could be anything", and the large tier's longer limits only cost waiting
    time, whereas a too-short limit fails a job that would have succeeded.
    """
    if size_bytes is None:
        return "large"
    if size_bytes < 0:
        raise ValueError(f"a size cannot be negative: {size_bytes}")
    if size_bytes < SMALL_BELOW_BYTES:
        return "small"
    if size_bytes < MEDIUM_BELOW_BYTES:
        return "medium"
    return "large"


#: The job queues, one per size tier, so that one 300-page document does not starve the small ones.
QUEUE_SMALL: Final = "doclane.small"
QUEUE_MEDIUM: Final = "doclane.medium"
QUEUE_LARGE: Final = "doclane.large"
JOB_QUEUES: Final[tuple[str, ...]] = (QUEUE_SMALL, QUEUE_MEDIUM, QUEUE_LARGE)
#: The reconciler's queue: never behind a backlog of documents.
CONTROL_QUEUE: Final = "doclane.control"
#: Every queue doclane declares: what a worker consumes by default and whose depths are shown.
ALL_QUEUES: Final[tuple[str, ...]] = (*JOB_QUEUES, CONTROL_QUEUE)


def queue_for_tier(tier: SizeTier) -> str:
    """The job queue of a size tier: ``doclane.small|medium|large``."""
    return f"doclane.{tier}"


def queue_for(size_bytes: int | None) -> str:
    """The job queue of a document of ``size_bytes`` (unknown size: large)."""
    return queue_for_tier(size_tier(size_bytes))


def tier_of_queue(queue: str) -> SizeTier:
    """The size tier whose jobs ``queue`` carries; any other queue is treated as large (the
    longest limits only cost waiting time)."""
    for tier in SIZE_TIERS:
        if queue == queue_for_tier(tier):
            return tier
    return "large"


#: A job's priority may be any value its column holds (``jobs.priority``, a smallint); higher
#: runs first. What reaches the broker is its level (:func:`clamp_priority`).
JOB_PRIORITY_MIN: Final = -32768
JOB_PRIORITY_MAX: Final = 32767
#: The message priority levels doclane uses, lowest first: ten, 0..9. Kombu's Redis transport
#: clamps priorities to 0..9, and RabbitMQ recommends few levels (each one costs it memory and
#: CPU); the job queues are declared with ``x-max-priority`` of the top level.
PRIORITY_LEVELS: Final = range(10)


def clamp_priority(priority: int) -> int:
    """The message priority level of a job's ``priority``: 0 (the default) and every negative
    value share the lowest level, 9 and every larger value (e.g. 100) the highest."""
    return min(max(priority, PRIORITY_LEVELS[0]), PRIORITY_LEVELS[-1])


#: How many bells a wake-up rings on a queue at most by default: a drain takes every job it may
#: while there is work, so more bells than the fleet has idle pool processes only cost an empty
#: claim each (``DOCLANE_WAKE_BELLS`` sets a submission's).
WAKE_BELLS: Final = 8


@dataclass(frozen=True, slots=True)
class Wakeup:
    """A bell on a queue: "drain this queue". It names no job and stands for none: the pool
    process that takes it claims the fair order's next jobs until a claim finds nothing it may
    take (or its time budget ends, and it rings again). How urgent: the priority of the most
    urgent job it was rung for (higher first, sent as its level); optionally not before when
    (a retry's due time). A bell lost, flushed or doubled costs a reconcile interval or an
    empty claim, never a job."""

    queue: str
    priority: int = 0
    countdown_s: float | None = None


def ring(publisher: Publisher, wakeups: Iterable[Wakeup]) -> dict[str, str]:
    """Ring each bell; the queues whose bell the broker refused, with why (their work waits
    in PostgreSQL, and the reconciler's next pass rings for it). Never raises."""
    refused: dict[str, str] = {}
    for wakeup in wakeups:
        if wakeup.queue in refused:
            continue
        try:
            publisher.publish(wakeup)
        except Exception as exc:  # any broker trouble: the reconciler rings again
            log.warning("cannot ring %s (the reconciler will): %s", wakeup.queue, exc)
            refused[wakeup.queue] = str(exc) or type(exc).__name__
    return refused


def bells_for(filled: Mapping[str, tuple[int, int]], bells: int = WAKE_BELLS) -> list[Wakeup]:
    """The bells for queues given as queue -> (jobs waiting, top priority): as many as are
    useful, one a job up to ``bells`` a queue."""
    return [
        Wakeup(queue, priority=priority)
        for queue, (jobs, priority) in filled.items()
        for _ in range(min(jobs, bells))
    ]


def wake(
    publisher: Publisher, claimable: Mapping[str, int], bells: int = WAKE_BELLS
) -> tuple[dict[str, int], dict[str, str]]:
    """Ring where claimable work waits (``claimable``: jobs a drain could take now, by queue)
    and no bell does: a queue whose broker holds bells is being drained, or soon will be.
    The bells rung, and the queues whose bell the broker refused (with why), by queue."""
    rung: dict[str, int] = {}
    refused: dict[str, str] = {}
    for queue, jobs in claimable.items():
        try:
            if publisher.waiting(queue):
                continue
        except Exception as exc:  # the broker cannot say: a doubled bell costs an empty claim
            log.info("cannot read the bells of %s: %s", queue, exc)
        wakeups = [Wakeup(queue)] * min(jobs, bells)
        failed = ring(publisher, wakeups)
        if failed:
            refused.update(failed)
        elif wakeups:
            rung[queue] = len(wakeups)
    return rung, refused


class Publisher(Protocol):
    """Rings the bells on the broker."""

    def publish(self, wakeup: Wakeup) -> None:
        """Ring one bell; raise if the broker did not take it."""
        ...

    def waiting(self, queue: str) -> int | None:
        """How many bells wait in ``queue`` right now; None when the broker cannot say."""
        ...


@dataclass(slots=True)
class RecordingPublisher:
    """A publisher that only remembers what it was given (dry runs, the Python API's default)."""

    messages: list[Wakeup] = field(default_factory=list)
    #: What ``waiting`` answers per queue (absent: unknown).
    depths: dict[str, int] = field(default_factory=dict)

    def publish(self, wakeup: Wakeup) -> None:
        self.messages.append(wakeup)

    def waiting(self, queue: str) -> int | None:
        return self.depths.get(queue)
