"""One trace per job, with OpenTelemetry: configured by the standard ``OTEL_*`` variables, off
and free when they are unset.

Tracing is on in a process when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set and ``OTEL_SDK_DISABLED`` is not ``true``. Then
:func:`configure` installs the SDK's tracer provider with a batching OTLP/HTTP (protobuf)
exporter; the SDK itself reads everything else: ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and its argument, the exporter's headers,
timeout and compression. When it is off, nothing of OpenTelemetry is imported, and every helper
here costs one test of a module global.

How a job's trace is carried:

- **Submission** (:class:`JobTraces`): each new job gets a root span of its own, and the W3C
  trace context of that span (``traceparent``, ``tracestate``) is stored with the job
  (``jobs.trace_context``, migration 0018), so whoever works on the job later continues the same
  trace: its worker, a retry, a message the reconciler republished, a slice (the database gives
  a slice its parent's context).
- **A worker's attempt** (:func:`job_span`): a span whose parent is the stored context.
- **MCP requests** (:func:`mcp_request_span`): a client span per JSON-RPC request, named and
  attributed as OpenTelemetry's MCP semantic conventions say, and its context in the request's
  ``params._meta`` (``traceparent``, ``tracestate``: SEP-414), so a server that traces joins
  the job's trace.
- **The store** (:func:`store_span`): a span per database round trip.

Every span inside a job names it (``doclane.job.id``), read from the job's log context
(:mod:`pipeline.support.logs`), and :func:`current_trace_ids` gives the log filter the trace and
span ids for every log record beside the job id.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar
from uuid import UUID

from pipeline.support.logs import current_job_context, use_trace_ids

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger(__name__)

#: The attribute every span of a job carries.
JOB_ID = "doclane.job.id"
#: W3C Trace Context's fields, as stored with a job and sent in an MCP request's ``_meta``.
CARRIER_FIELDS = ("traceparent", "tracestate")

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class _State:
    """The process's tracer: None while tracing is off (set once, after any fork)."""

    tracer: Tracer | None = None


_state = _State()


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in _ENDPOINT_VARIABLES)


def configure(default_service_name: str) -> bool:
    """Turn tracing on in this process if the environment asks for it; True when it is on.

    Call it once per process, after any fork (a Celery worker process calls it in
    ``worker_process_init``). ``OTEL_SERVICE_NAME`` wins over ``default_service_name``.
    """
    if _state.tracer is not None:
        return True
    if not wanted():
        return False
    protocol = os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if protocol and protocol != "http/protobuf":
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: doclane exports http/protobuf only", protocol)
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_NAME: default_service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _state.tracer = provider.get_tracer("doclane")
    use_trace_ids(current_trace_ids)
    return True


def shutdown() -> None:
    """Export what is still buffered; a process that ends with ``os._exit`` (a Celery worker
    process) calls this on its way out, since no exit hook runs there."""
    if _state.tracer is None:
        return
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    shut = getattr(provider, "shutdown", None)
    if shut is not None:
        shut()
    _state.tracer = None


def enabled() -> bool:
    return _state.tracer is not None


# ---- carriers: a trace context as text ----------------------------------------------------


def _carrier_of(span: Span) -> dict[str, str]:
    from opentelemetry.propagate import inject
    from opentelemetry.trace import set_span_in_context

    carrier: dict[str, str] = {}
    inject(carrier, context=set_span_in_context(span))
    return {k: v for k, v in carrier.items() if k in CARRIER_FIELDS}


def _context_of(carrier: Mapping[str, str] | None) -> Context | None:
    if not carrier:
        return None
    from opentelemetry.propagate import extract

    return extract(dict(carrier))


#: The job whose trace the current span is in (set by job_span and jobs_span): what the spans
#: inside name, even where the log context names another job (a round's store, led by one job,
#: writing in another's trace).
_traced_job: ContextVar[str | None] = ContextVar("doclane_traced_job", default=None)


@contextlib.contextmanager
def _naming(job_id: str) -> Iterator[None]:
    token = _traced_job.set(job_id)
    try:
        yield
    finally:
        _traced_job.reset(token)


def _job_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(attributes)
    traced = _traced_job.get()
    job = current_job_context()
    if traced is not None:
        out.setdefault(JOB_ID, traced)
    elif job is not None:
        out.setdefault(JOB_ID, job.job_id)
    return out


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Span | None]:
    """A span inside the current one (with the current job's id); None when tracing is off."""
    tracer = _state.tracer
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes=_job_attributes(attributes)) as current:
        yield current


# ---- the job's trace: started at submission, continued by every attempt --------------------


class _JobSpec(Protocol):
    """What :class:`JobTraces` needs of a job to be created (``pipeline.jobs.model.NewJob``; named
    by its shape, since the MCP client, which imports this module, may not know the job)."""

    @property
    def queue(self) -> str: ...

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Self: ...


SpecT = TypeVar("SpecT", bound=_JobSpec)


class JobTraces(Generic[SpecT]):
    """The root span of each job of a submission chunk, open from before its row exists until
    its message is published: ``specs`` are the jobs to create, each with its trace context.

        traces = JobTraces(specs)
        created = store.submissions.create_many(traces.specs)
        ...publish...
        traces.end([made.job_id for made in created])

    A chunk whose creation failed is never ended, so it exports nothing: no job, no trace.
    """

    def __init__(self, specs: Sequence[SpecT]) -> None:
        self._spans: list[Span] = []
        self.specs: list[SpecT]
        tracer = _state.tracer
        if tracer is None:
            self.specs = list(specs)
            return
        from opentelemetry.context import Context
        from opentelemetry.trace import Link, SpanKind, get_current_span

        submission = get_current_span().get_span_context()
        links = [Link(submission)] if submission.is_valid else []
        self.specs = []
        for spec in specs:
            root = tracer.start_span(
                "doclane.job.submit",
                context=Context(),  # a trace of its own: one trace per job
                kind=SpanKind.PRODUCER,
                links=links,
                attributes={"doclane.queue": spec.queue},
            )
            self._spans.append(root)
            self.specs.append(spec.model_copy(update={"trace_context": _carrier_of(root)}))

    def end(self, job_ids: Sequence[UUID | None]) -> None:
        """End each spec's span with its job's id; None (a spec that made no job: refused for
        its tenant's quota) leaves its span unended, so it exports nothing."""
        if not self._spans:  # tracing off, or ended already
            return
        for root, job_id in zip(self._spans, job_ids, strict=True):
            if job_id is None:
                continue
            root.set_attribute(JOB_ID, str(job_id))
            root.end()
        self._spans = []


@contextlib.contextmanager
def job_span(
    name: str, job_id: UUID, trace_context: Mapping[str, str] | None, *, attempt: int
) -> Iterator[None]:
    """A span of work on one job, continuing the trace stored with it (a new trace when it has
    none: a job submitted while tracing was off)."""
    tracer = _state.tracer
    if tracer is None:
        yield
        return
    from opentelemetry.trace import SpanKind

    with (
        tracer.start_as_current_span(
            name,
            context=_context_of(trace_context),
            kind=SpanKind.CONSUMER,
            attributes={JOB_ID: str(job_id), "doclane.job.attempt": attempt},
        ),
        _naming(str(job_id)),
    ):
        yield


@contextlib.contextmanager
def jobs_span(name: str, jobs: Sequence[tuple[UUID, Mapping[str, str] | None]]) -> Iterator[None]:
    """One piece of work for many jobs at once (a round's results in one transaction): a span
    in the first job's trace, linked to every other job's, naming them all
    (``doclane.job.ids``)."""
    tracer = _state.tracer
    if tracer is None or not jobs:
        yield
        return
    from opentelemetry.trace import Link, get_current_span

    contexts = [_context_of(carrier) for _, carrier in jobs]
    links = [
        Link(get_current_span(context).get_span_context())
        for context in contexts[1:]
        if context is not None and get_current_span(context).get_span_context().is_valid
    ]
    ids = [str(job_id) for job_id, _ in jobs]
    with (
        tracer.start_as_current_span(
            name,
            context=contexts[0],
            links=links,
            attributes={JOB_ID: ids[0], "doclane.job.ids": ids},
        ),
        _naming(ids[0]),
    ):
        yield


# ---- MCP requests and the store's round trips ---------------------------------------------


@contextlib.contextmanager
def mcp_request_span(
    message: dict[str, Any], session_id: str | None, protocol_version: str | None
) -> Iterator[None]:
    """A client span for one JSON-RPC request, as OpenTelemetry's MCP semantic conventions name
    it (``tools/call convert_document``), whose context goes into ``params._meta``."""
    tracer = _state.tracer
    if tracer is None:
        yield
        return
    from opentelemetry.trace import SpanKind, get_current_span

    if not get_current_span().get_span_context().is_valid:
        yield  # outside any trace (a warm-up, `doclane mcp ping`): nothing to join
        return
    method = str(message.get("method", ""))
    params = message.setdefault("params", {})
    tool = params.get("name") if method == "tools/call" else None
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "jsonrpc.request.id": str(message.get("id")),
    }
    if session_id:
        attributes["mcp.session.id"] = session_id
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if isinstance(tool, str):
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = tool
    name = f"{method} {tool}" if isinstance(tool, str) else method
    with tracer.start_as_current_span(
        name, kind=SpanKind.CLIENT, attributes=_job_attributes(attributes)
    ) as current:
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **_carrier_of(current)}
        yield


@contextlib.contextmanager
def store_span(action: str) -> Iterator[None]:
    """A span per database round trip of the job store, named by what it does."""
    tracer = _state.tracer
    if tracer is None:
        yield
        return
    from opentelemetry.trace import SpanKind, get_current_span

    if not get_current_span().get_span_context().is_valid:
        yield  # outside any trace: a span of its own would be a trace of one round trip
        return
    attributes = _job_attributes({"db.system.name": "postgresql", "db.operation.name": action})
    with tracer.start_as_current_span(f"doclane.store {action}", kind=SpanKind.CLIENT,
                                       attributes=attributes):  # fmt: skip
        yield


# ---- logs ----------------------------------------------------------------------------------


def current_trace_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids (hex, as trace back-ends show them), or None
    outside a span; what :class:`pipeline.support.logs.TraceIdsFilter` puts on log lines."""
    if _state.tracer is None:
        return None
    from opentelemetry.trace import get_current_span

    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
