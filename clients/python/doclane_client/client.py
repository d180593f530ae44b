"""``Client`` and ``AsyncClient``: the same methods, blocking or as coroutines.

Both stand on one :class:`_Methods` base that turns each call into a plan
(:mod:`doclane_client._plans`); a client's only own code is how it carries out a plan's effects
(:meth:`Client._run`, :meth:`AsyncClient._run` and their ``_feed`` twins) and a streamed result,
which httpx reads with ``iter_bytes`` or ``aiter_bytes``. The public methods are declared once
per client only so that their signatures and return types read as they are (a value or a
coroutine; an iterator or an async iterator): each is one line handing the plan on.

::

    with Client("http://doclane:8080", token="...") as dl:
        jobs = dl.submit(["report.docx"], to=["md", "chunks"])
        for job in dl.wait(jobs, timeout=600):
            print(job.id, job.state, dl.result(job.id, "md")[:80])
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Generic, Self, TypedDict, TypeVar, Unpack
from uuid import UUID

import anyio
import httpx

from doclane_client import _loading
from doclane_client import _plans as plans
from doclane_client._core import (
    Core,
    Effect,
    Emit,
    Feed,
    Plan,
    Read,
    RetryPolicy,
    Send,
    Sleep,
    user_agent,
)
from doclane_client._loading import Loaded, LoadSpec
from doclane_client._plans import Asked, JobRef, PathOrSource, Polling, Submission, Waiter
from doclane_client.models import Job, JobDetail, RetryOutcome, Stats

T = TypeVar("T")
Formats = str | Sequence[str]


class _Methods:
    """What both clients share: the settings, and each call as a plan."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        retries: RetryPolicy | None = None,
        polling: Polling | None = None,
        **http: Any,
    ) -> None:
        """``timeout`` bounds each request (``wait`` has its own); ``retries`` and ``polling``
        tune how transient faults are retried and how ``wait`` polls; ``http`` options
        (``transport``, ``verify``, ...) go to the httpx client underneath."""
        self.url = url.rstrip("/")
        self.core = Core(retries or RetryPolicy())
        self.polling = polling or Polling()
        self._headers = {"User-Agent": user_agent(), "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        timeouts = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._http = self._http_class(
            base_url=self.url, headers=self._headers, timeout=timeouts, **http
        )

    _http_class: type[httpx.Client] | type[httpx.AsyncClient]

    @staticmethod
    def _request(http: httpx.Client | httpx.AsyncClient, send: Send) -> httpx.Request:
        return http.build_request(
            send.method,
            send.path,
            params=send.params,
            json=send.json,
            data=send.data,
            files=send.files,
            headers=send.headers,
        )

    def _submit(self, paths: Iterable[PathOrSource], asked: Asked) -> Plan[Submission]:
        return plans.submit_files(self.core, paths, asked)

    def _submit_sources(self, sources: Iterable[str], asked: Asked) -> Plan[Submission]:
        return plans.submit_sources(self.core, sources, asked)

    def _wait(self, jobs: Iterable[JobRef], timeout: float | None) -> Feed[Job]:
        return plans.wait(self.core, Waiter(jobs, timeout, self.polling))

    def _jobs(self, limit: int | None, page_size: int, filters: JobFilters) -> Feed[Job]:
        return plans.list_jobs(self.core, dict(filters), limit, page_size)

    def _text(self, job: JobRef, fmt: str) -> Plan[str]:
        response = yield from plans.result(self.core, job, fmt)
        return response.content.decode("utf-8")

    def _retry(self, job: JobRef) -> Plan[RetryOutcome]:
        send = Send("POST", f"/v1/jobs/{plans.job_id(job)}/retry")
        return RetryOutcome.model_validate((yield from self.core.json(send, idempotent=False)))

    def _load(
        self, items: PathOrSource | Iterable[PathOrSource] | LoadSpec, asked: dict[str, Any]
    ) -> Feed[Loaded]:
        spec = items if isinstance(items, LoadSpec) else LoadSpec.of(items, **asked)
        return _loading.load(self.core, spec, self.polling)

    def _stats(self) -> Plan[Stats]:
        return Stats.model_validate((yield from self.core.json(Send("GET", "/v1/stats"))))


class JobFilters(TypedDict, total=False):
    """``jobs()``'s filters, as ``GET /v1/jobs`` takes them (every one optional)."""

    state: str
    error_code: str
    since: str
    queue: str
    submission: str | UUID
    tenant: str


class SubmitOptions(TypedDict, total=False):
    """What a submission may ask besides its sources and formats (the API's fields)."""

    priority: int
    options: dict[str, Any] | None
    webhook: str | None
    tenant: str | None


class Client(_Methods):
    """The API, blocking (see :class:`_Methods` for the options)."""

    _http: httpx.Client
    _http_class = httpx.Client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ---- the effects -------------------------------------------------------------------
    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Sleep):
            time.sleep(effect.seconds)
            return None
        if isinstance(effect, Read):
            try:
                effect.response.read()
            finally:
                effect.response.close()
            return None
        try:
            return self._http.send(self._request(self._http, effect), stream=effect.stream)
        except httpx.TransportError as exc:
            return exc

    def _run(self, plan: Plan[T]) -> T:
        steps = _Steps[T](plan)
        for effect in steps:
            assert not isinstance(effect, Emit)  # a plan hands nothing on: it ends with a value
            steps.outcome = self._perform(effect)
        return steps.value

    def _feed(self, feed: Feed[T]) -> Iterator[T]:
        """The feed's items as it emits them, carrying out every other effect."""
        with _Steps[None](feed) as steps:
            for effect in steps:
                if isinstance(effect, Emit):
                    yield effect.item
                else:
                    steps.outcome = self._perform(effect)

    # ---- the API -----------------------------------------------------------------------
    def submit(
        self, paths: Iterable[PathOrSource], to: Formats = "md", **asked: Unpack[SubmitOptions]
    ) -> Submission:
        """Upload local files, one job each (``priority``, ``options``, ``webhook``, ``tenant``:
        the API's fields; ``tenant`` is for a token of no tenant, naming whose jobs they are)."""
        return self._run(self._submit(paths, Asked(to, **asked)))

    def submit_sources(
        self, sources: Iterable[str], to: Formats = "md", **asked: Unpack[SubmitOptions]
    ) -> Submission:
        """Sources the server fetches: URLs, s3:// keys and prefixes, paths it can read."""
        return self._run(self._submit_sources(sources, Asked(to, **asked)))

    def wait(self, jobs: Iterable[JobRef], timeout: float | None = None) -> Iterator[Job]:
        """Each job as it ends (succeeded, failed or cancelled), in the order they end."""
        return self._feed(self._wait(jobs, timeout))

    def job(self, job: JobRef) -> JobDetail:
        return self._run(plans.get_job(self.core, job))

    def jobs(
        self, *, limit: int | None = None, page_size: int = 200, **filters: Unpack[JobFilters]
    ) -> Iterator[Job]:
        """Jobs newest first, paging through (filters: state, error_code, since, queue,
        submission, tenant)."""
        return self._feed(self._jobs(limit, page_size, filters))

    def result(self, job: JobRef, fmt: str = "md") -> str:
        return self._run(self._text(job, fmt))

    def result_stream(self, job: JobRef, fmt: str = "md") -> Iterator[bytes]:
        """The result's bytes as they arrive (a 50 MB result never held whole)."""
        response = self._run(plans.result(self.core, job, fmt, stream=True))
        try:
            yield from response.iter_bytes()
        finally:
            response.close()

    def cancel(self, job: JobRef) -> Job:
        return self._run(plans.cancel(self.core, job))

    def retry(self, job: JobRef) -> RetryOutcome:
        return self._run(self._retry(job))

    def stats(self) -> Stats:
        return self._run(self._stats())

    def load(
        self, items: PathOrSource | Iterable[PathOrSource] | LoadSpec, **asked: Any
    ) -> Iterator[Loaded]:
        """Submit, wait, and yield each result as records (what the RAG loaders do): ``to``
        "md" or "chunks", ``on_error`` "raise" or "skip", ``timeout``, ``options``."""
        return self._feed(self._load(items, asked))


class AsyncClient(_Methods):
    """The API as coroutines: :class:`Client`'s methods, awaited (``wait``, ``jobs``, ``load``
    and ``result_stream`` are async iterators)."""

    _http: httpx.AsyncClient
    _http_class = httpx.AsyncClient

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- the effects -------------------------------------------------------------------
    async def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Sleep):
            await anyio.sleep(effect.seconds)
            return None
        if isinstance(effect, Read):
            try:
                await effect.response.aread()
            finally:
                await effect.response.aclose()
            return None
        try:
            return await self._http.send(self._request(self._http, effect), stream=effect.stream)
        except httpx.TransportError as exc:
            return exc

    async def _run(self, plan: Plan[T]) -> T:
        steps = _Steps[T](plan)
        for effect in steps:
            assert not isinstance(effect, Emit)
            steps.outcome = await self._perform(effect)
        return steps.value

    async def _feed(self, feed: Feed[T]) -> AsyncIterator[T]:
        with _Steps[None](feed) as steps:
            for effect in steps:
                if isinstance(effect, Emit):
                    yield effect.item
                else:
                    steps.outcome = await self._perform(effect)

    # ---- the API -----------------------------------------------------------------------
    async def submit(
        self, paths: Iterable[PathOrSource], to: Formats = "md", **asked: Unpack[SubmitOptions]
    ) -> Submission:
        return await self._run(self._submit(paths, Asked(to, **asked)))

    async def submit_sources(
        self, sources: Iterable[str], to: Formats = "md", **asked: Unpack[SubmitOptions]
    ) -> Submission:
        return await self._run(self._submit_sources(sources, Asked(to, **asked)))

    def wait(self, jobs: Iterable[JobRef], timeout: float | None = None) -> AsyncIterator[Job]:
        return self._feed(self._wait(jobs, timeout))

    async def job(self, job: JobRef) -> JobDetail:
        return await self._run(plans.get_job(self.core, job))

    def jobs(
        self, *, limit: int | None = None, page_size: int = 200, **filters: Unpack[JobFilters]
    ) -> AsyncIterator[Job]:
        return self._feed(self._jobs(limit, page_size, filters))

    async def result(self, job: JobRef, fmt: str = "md") -> str:
        return await self._run(self._text(job, fmt))

    async def result_stream(self, job: JobRef, fmt: str = "md") -> AsyncIterator[bytes]:
        response = await self._run(plans.result(self.core, job, fmt, stream=True))
        try:
            async for piece in response.aiter_bytes():
                yield piece
        finally:
            await response.aclose()

    async def cancel(self, job: JobRef) -> Job:
        return await self._run(plans.cancel(self.core, job))

    async def retry(self, job: JobRef) -> RetryOutcome:
        return await self._run(self._retry(job))

    async def stats(self) -> Stats:
        return await self._run(self._stats())

    def load(
        self, items: PathOrSource | Iterable[PathOrSource] | LoadSpec, **asked: Any
    ) -> AsyncIterator[Loaded]:
        return self._feed(self._load(items, asked))


class _Steps(Generic[T]):
    """A plan or feed, stepped by a driver: iterating gives its effects (and a feed's
    :class:`Emit`) one by one, each sent the ``outcome`` the driver left for it; a plan's value
    ends in ``value``. As a context manager, it closes the generator when the driver is left
    early (a ``break`` out of ``wait``), and with it any file an upload had open."""

    value: T

    def __init__(self, steps: Plan[T] | Feed[Any]) -> None:
        self.steps = steps
        self.outcome: Any = None

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Effect | Emit[Any]:
        outcome, self.outcome = self.outcome, None
        try:
            return self.steps.send(outcome)
        except StopIteration as done:
            self.value = done.value
            raise StopIteration from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.steps.close()
