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

Retries are tenacity's (:class:`RetryPolicy`): its ``Retrying.iter`` is a state machine that says
"attempt" or "sleep N" and never sleeps itself, so one policy object drives both clients.
tenacity rather than ``backoff`` (which doclane itself uses): ``backoff`` retries by decorating a
function that does the I/O, so a sync and an async client would each need their own decorated
copy, and the ``backoff`` module is installed by two rival distributions (``backoff`` and
``python-backoff``) that overwrite each other in a user's environment; tenacity is maintained,
and ``langchain-core`` and ``llama-index-core`` already depend on it. httpx's own transport
``retries=`` covers failed connects only: no 429, no 503, no ``Retry-After``.
"""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
import tenacity

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
    ``Retry-After``, exactly that. A ``Retry-After``
    longer than ``max_retry_after_s`` is not waited for: the error is raised at once with its
    ``retry_after``, for the caller to plan around. A read cut off mid-answer is tried again only
    for requests that change nothing (GET).
    """

    attempts: int = 8
    total_s: float = 120.0
    initial_s: float = 0.25
    max_wait_s: float = 15.0
    max_retry_after_s: float = 120.0

    def retrying(self, *, idempotent: bool) -> tenacity.Retrying:
        def transient(exc: BaseException) -> bool:
            if isinstance(exc, DoclaneError):
                if exc.status not in TRANSIENT_STATUSES:
                    return False
                return exc.retry_after is None or exc.retry_after <= self.max_retry_after_s
            if isinstance(exc, _NOT_SENT):
                return True
            return idempotent and isinstance(exc, httpx.TransportError)

        backoff = tenacity.wait_random_exponential(multiplier=self.initial_s, max=self.max_wait_s)

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            after = getattr(exc, "retry_after", None)
            return float(after) if after is not None else float(backoff(state))

        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts)
            | tenacity.stop_after_delay(self.total_s),
            wait=wait,
            retry=tenacity.retry_if_exception(transient),
            reraise=True,
        )


@dataclass(frozen=True)
class Core:
    """What every plan needs: the retry policy, and how to tell a good answer from a refusal."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)

    def call(self, send: Callable[[], Send], *, idempotent: bool | None = None) -> Plan[Any]:
        """The answer to ``send()`` (called again for each try: an upload reopens its file),
        retried as the policy says; a refusal raised as its :class:`DoclaneError`. A streamed
        answer comes back unread (the caller reads and closes it)."""
        first = send()
        retrying = self.policy.retrying(
            idempotent=first.method == "GET" if idempotent is None else idempotent
        )
        retrying.begin()
        state = tenacity.RetryCallState(retrying, fn=None, args=(), kwargs={})
        attempt: Send | None = first
        while True:
            try:
                action = retrying.iter(retry_state=state)
            except httpx.TransportError as exc:  # retried as far as the policy goes, or unsafe
                raise Unavailable(
                    "unreachable", f"{type(exc).__name__}: {exc}", retryable=True
                ) from exc
            if isinstance(action, tenacity.DoAttempt):
                try:
                    outcome = yield (attempt or send())
                    attempt = None
                    if isinstance(outcome, httpx.TransportError):
                        raise outcome
                    yield from self.check(outcome)
                except (httpx.TransportError, DoclaneError):
                    state.set_exception(sys.exc_info())  # type: ignore[arg-type]
                else:
                    state.set_result(outcome)
            elif isinstance(action, tenacity.DoSleep):
                state.prepare_for_next_attempt()
                yield Sleep(float(action))
            else:
                return action

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
    "user_agent",
]
