"""The queues: size tiers, the queue each tier's jobs go to, the control queue, the message
priority levels, and the publisher port through which the library wakes a worker without
knowing Celery.

A 300-page PDF must neither starve small documents on a shared queue nor be cut off by a timeout
meant for a one-page memo, so the queue a job goes to (``doclane.small|medium|large``), the
worker's Celery time limits and the MCP client's call timeouts all pick their tier here. This
module imports only the standard library, so that every layer can import it without cycles.

A message carries only a job id, and is a claim right on its queue (:class:`JobMessage`);
PostgreSQL holds everything else. ``workers/`` implements :class:`Publisher` with Celery and
the CLI (the composition root) wires it in. A publisher may fail (the broker is down): the
job row is already committed, stays queued, and the reconciler publishes it again later, so
callers log the failure and carry on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable
from uuid import UUID

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


#: How many queued jobs of a queue one message on it stands for. A message is a claim right on
#: its queue (the fair order, not the message, picks the job), and on the small queue a claim
#: takes a round or a batch of up to ``DOCLANE_ROUND_MAX_DOCS`` / ``DOCLANE_BATCH_MAX_DOCS``
#: jobs (8 by default, hence 8 here): one message a job left seven of every eight messages to
#: find their jobs taken, each paying Celery's hand-off and a claim for nothing. So a
#: submission publishes one message per this many of its jobs; a worker whose claim took
#: fewer jobs than the message stands for passes a message on (:func:`passes_on`), so the
#: claim rights are never fewer than the queued jobs (what the reconciler's lost-message sweep
#: counts: the broker's depth times this). Medium and large jobs go alone, a message each. One
#: number for the whole fleet, in code: the submitters, the workers and the reconciler must
#: agree on it.
JOBS_PER_MESSAGE: Final[Mapping[str, int]] = {QUEUE_SMALL: 8, QUEUE_MEDIUM: 1, QUEUE_LARGE: 1}


def jobs_per_message(queue: str) -> int:
    """How many queued jobs a message on ``queue`` stands for (1 on any queue not doclane's)."""
    return JOBS_PER_MESSAGE.get(queue, 1)


def passes_on(queue: str, claimed: int) -> bool:
    """Whether a message's claim that took ``claimed`` jobs of ``queue`` must pass a message on.

    A message stands for ``n`` jobs' claims and is spent by one claim: a claim that took fewer
    than ``n`` leaves the queue with fewer claim rights than before by the difference, unless
    it publishes a message (``n`` rights) again; one that took nothing found no work it could
    take (an empty queue's rights are worthless, and capped work is owed to the queue)."""
    return 0 < claimed < jobs_per_message(queue)


@dataclass(frozen=True, slots=True)
class JobMessage:
    """A wake-up call on a job's queue: the job it names, on which queue, how urgent (the
    job's priority, higher runs first, sent as its level), and (optionally) not before when.

    The message is a claim right on its queue for as many queued jobs as it ``covers`` (at most
    :func:`jobs_per_message`; by default the job it names): the claim takes whichever the
    fair order gives, the named job first when it is as old as its lane's head, and a retrying
    named job is brought back into its lane when due. What a publish report says of a
    message, it says of every job it covers."""

    job_id: UUID
    queue: str
    countdown_s: float | None = None
    priority: int = 0
    covers: tuple[UUID, ...] = ()

    @property
    def jobs(self) -> tuple[UUID, ...]:
        """The jobs whose claim rights this message carries."""
        return self.covers or (self.job_id,)


def messages_for(jobs: Iterable[tuple[UUID, str, int]]) -> list[JobMessage]:
    """The messages for queued jobs given as (id, queue, priority), in their order: on each
    queue and priority, one per :func:`jobs_per_message` of them, naming the first it covers."""
    groups: dict[tuple[str, int], list[UUID]] = {}
    for job_id, queue, priority in jobs:
        groups.setdefault((queue, priority), []).append(job_id)
    messages = []
    for (queue, priority), ids in groups.items():
        n = jobs_per_message(queue)
        for start in range(0, len(ids), n):
            covered = tuple(ids[start : start + n])
            messages.append(JobMessage(covered[0], queue, priority=priority, covers=covered))
    return messages


class Publisher(Protocol):
    """Hands job ids to the broker."""

    def publish(self, message: JobMessage) -> None:
        """Publish one message; raise if the broker did not take it."""
        ...

    def waiting(self, queue: str) -> int | None:
        """How many messages wait in ``queue`` right now; None when the broker cannot say."""
        ...


@runtime_checkable
class BatchPublisher(Protocol):
    """A publisher that can hand many messages to the broker in one go (a Redis pipeline)."""

    def publish_batch(self, messages: Sequence[JobMessage]) -> None:
        """Publish every message, or raise: then any of them may or may not have been taken."""
        ...


@dataclass(slots=True)
class RecordingPublisher:
    """A publisher that only remembers what it was given (dry runs, the Python API's default)."""

    messages: list[JobMessage] = field(default_factory=list)
    #: What ``waiting`` answers per queue (absent: unknown).
    depths: dict[str, int] = field(default_factory=dict)

    def publish(self, message: JobMessage) -> None:
        self.messages.append(message)

    def waiting(self, queue: str) -> int | None:
        return self.depths.get(queue)
