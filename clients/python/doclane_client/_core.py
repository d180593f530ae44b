"""One implementation of every call, for the sync and the async client alike.

An operation is written once, as a generator: a *plan*. It never touches the network or the
clock's sleep itself; it yields *effects* and is sent their outcomes:

* :class:`Send` (a request) is answered with the ``httpx.Response``, or with the
  ``httpx.TransportError`` that stopped it (sent back as a value, never thrown in, so plans
  nest with a plain ``yield from``);
* :class:`Sleep` (seconds) is answered with None once they have passed;
* :class:`Read` (a streamed response whose status says error) with None once its body is read;
* a *feed* (an operation that yields many things: a job list's pages, jobs as they end) also
  yields :class:`Emit`, the next item for the caller.

``Client`` performs effects with ``httpx.Client`` and ``time.sleep``; ``AsyncClient`` with
``httpx.AsyncClient`` and ``anyio.sleep``. Requests, paging, waiting, error mapping and retries
exist once, here and in :mod:`doclane_client._plans`; the clients only carry them out.

Retries are the plan's own loop (:meth:`Core.call`): a failed try is judged by the
:class:`RetryPolicy`, and the wait before the next is :func:`retry_wait_s`, yielded as a
:class:`Sleep` like any other effect, so one loop serves both clients. httpx's own transport
``retries=`` covers failed connects only: no 429, no 503, no ``Retry-After``.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from doclane_client._version import __version__
from doclane_client.errors import DoclaneError, QuotaExceeded, Unavailable, error_for

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Send:
    """Send a request built from these parts (by the driver's httpx client, so its base URL,
    headers and timeouts apply); ``stream``: leave the body unread."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    data: dict[str, str] | None = None
    files: dict[str, Any] | None = None
    stream: bool = False
    headers: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Read:
    """Read the rest of a streamed response (then the driver closes it)."""

    response: httpx.Response


@dataclass(frozen=True, slots=True)
class Emit(Generic[T_co]):
    item: T_co


Effect = Send | Sleep | Read
#: An operation that ends with one value.
Plan = Generator[Effect, Any, T]
#: An operation that hands the caller items as it goes.
Feed = Generator[Effect | Emit[T], Any, None]

#: Statuses that mean "not now": the request may succeed if sent again.
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
#: Transport errors after which the request certainly did not reach the API: safe to send again
#: whatever it was. Any other (a read cut off, a protocol error) is retried for reads only.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying a request that failed for now.

    Connect errors, 502, 503, 504 and 429 are tried again, up to ``attempts`` tries within
    ``total_s`` seconds, waiting a random time below an exponentially growing ceiling
    (``initial_s`` doubling up to ``max_wait_s``: "full jitter") or, when the API answered
    ``Retry-After``, exactly that (:func:`retry_wait_s`). A wait that would end past
    ``total_s`` is not begun, and a ``Retry-After`` longer than ``max_retry_after_s`` is not
    waited for: the error is raised at once with its ``retry_after``, for the caller to plan
    around. A read cut off mid-answer is tried again only for requests that change nothing
    (GET).
    """

    attempts: int = 8
    total_s: float = 120.0
    initial_s: float = 0.25
    max_wait_s: float = 15.0
    max_retry_after_s: float = 120.0

    def wait_s(
        self, failure: Exception, *, tries: int, elapsed_s: float, idempotent: bool
    ) -> float | None:
        """Seconds to wait before trying again after ``failure`` (the ``tries``-th try failed,
        ``elapsed_s`` after the first was sent), or None: give up and raise it."""
        if isinstance(failure, DoclaneError):
            if failure.status not in TRANSIENT_STATUSES:
                return None
            if failure.retry_after is not None and failure.retry_after > self.max_retry_after_s:
                return None  # longer than this caller waits: theirs to plan around
        elif not isinstance(failure, _NOT_SENT) and not (
            idempotent and isinstance(failure, httpx.TransportError)
        ):
            return None
        if tries >= self.attempts:
            return None
        wait = retry_wait_s(self, tries, getattr(failure, "retry_after", None))
        return None if elapsed_s + wait > self.total_s else wait


def retry_wait_s(
    policy: RetryPolicy,
    tries: int,
    retry_after: float | None,
    draw: Callable[[], float] = random.random,
) -> float:
    """The wait after the ``tries``-th failed try: exactly ``retry_after`` when the API said
    (``Retry-After``); else "full jitter", a random time below a ceiling that starts at
    ``initial_s`` and doubles each try up to ``max_wait_s``, so that many clients refused at
    once do not come back at once.

    No retry library computes this: the client's dependencies are fixed at httpx and pydantic,
    so that it installs beside any RAG stack without pinning a third library against the
    frameworks' own, and the retry loop is the plans' own (:meth:`Core.call` yields the wait as
    a :class:`Sleep`, carried out by either client), so all a library would give is these
    three lines.
    """
    if retry_after is not None:
        return retry_after
    return draw() * min(policy.max_wait_s, policy.initial_s * 2.0 ** (tries - 1))


@dataclass(frozen=True)
class Core:
    """What every plan needs: the retry policy, and how to tell a good answer from a refusal."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)

    def call(self, send: Callable[[], Send], *, idempotent: bool | None = None) -> Plan[Any]:
        """The answer to ``send()`` (called again for each try: an upload reopens its file),
        retried as the policy says; a refusal raised as its :class:`DoclaneError`. A streamed
        answer comes back unread (the caller reads and closes it)."""
        attempt = send()
        if idempotent is None:
            idempotent = attempt.method == "GET"
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            outcome = yield attempt
            failure: Exception
            if isinstance(outcome, httpx.TransportError):
                failure = outcome
            else:
                try:
                    yield from self.check(outcome)
                except DoclaneError as refused:
                    failure = refused
                else:
                    return outcome
            elapsed = time.monotonic() - started
            wait = self.policy.wait_s(
                failure, tries=tries, elapsed_s=elapsed, idempotent=idempotent
            )
            if wait is None:
                if isinstance(failure, httpx.TransportError):  # retried as far as allowed
                    raise Unavailable(
                        "unreachable", f"{type(failure).__name__}: {failure}", retryable=True
                    ) from failure
                raise failure
            yield Sleep(wait)
            attempt = send()

    def json(self, send: Send, *, idempotent: bool | None = None) -> Plan[Any]:
        """The JSON body of the answer to ``send``."""
        response = yield from self.call(lambda: send, idempotent=idempotent)
        return response.json()

    def check(self, response: httpx.Response) -> Plan[None]:
        """Nothing for a 2xx; else the refusal, raised (a streamed body is read first)."""
        if response.is_success:
            return
        if not response.is_stream_consumed:
            yield Read(response)
        raise error_for(response.status_code, response.content, retry_after_s(response))


def retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None when absent or bad."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)


def user_agent() -> str:
    return f"doclane-client/{__version__} httpx/{httpx.__version__}"


__all__ = [
    "Core",
    "DoclaneError",
    "Effect",
    "Emit",
    "Feed",
    "Plan",
    "QuotaExceeded",
    "Read",
    "RetryPolicy",
    "Send",
    "Sleep",
    "retry_after_s",
    "retry_wait_s",
    "user_agent",
]
