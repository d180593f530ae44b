"""One trace per job, across real processes: the submitting CLI, a worker and an MCP server,
each exporting to a real OTLP/HTTP receiver (tests/support/otlp_receiver.py).

The fake server is the MCP SDK's low-level server, whose OpenTelemetry middleware continues the
trace context it finds in a request's ``params._meta``: a server that traces. The test submits
two documents and checks, for each job, one trace holding the CLI's root span, the worker's
attempt, its store round trips and MCP client spans (named by OpenTelemetry's MCP conventions),
and the server's span; the server saw that trace's id in ``_meta``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.fake_server import FakeServer
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan

JOB_ID = "doclane.job.id"


def _trace_of(spans: list[ReceivedSpan], job_id: UUID) -> str:
    (root,) = [
        s
        for s in spans
        if s.name == "doclane.job.submit" and s.attributes.get(JOB_ID) == str(job_id)
    ]
    assert root.service == "doclane-cli" and not root.parent_span_id
    return root.trace_id


def test_each_job_is_one_trace_across_the_cli_the_worker_and_the_server(
    redis_broker: Broker,
    make_cluster: Callable[..., Cluster],
    fake_server_factory: Callable[..., FakeServer],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    with OtlpReceiver().running() as receiver:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_TRACES_SAMPLER": "always_on",
            "OTEL_BSP_SCHEDULE_DELAY": "50",  # ms: spans reach the receiver while we wait
        }
        for name, value in otel.items():  # the fake server inherits this process's environment
            monkeypatch.setenv(name, value)
        server = fake_server_factory()
        cluster = make_cluster(redis_broker, server.url, **otel)
        cluster.start_worker(concurrency=1, beat=False)
        docs = []
        for name in ("a.md", "b.md"):
            docs.append(tmp_path / name)
            docs[-1].write_text(f"# {name}\n\ntraced\n")
        submitted = cluster.cli_json("submit", *map(str, docs), "--wait")
        job_ids = [UUID(a["job_id"]) for a in submitted["accepted"]]
        assert len(job_ids) == 2 and submitted["ok"]

        def server_spans_of_both() -> list[ReceivedSpan] | None:
            spans = receiver.spans()
            roots = [s for s in spans if s.name == "doclane.job.submit"]
            served = {s.trace_id for s in spans if s.service == "fake-docling-mcp"}
            done = len(roots) == 2 and {r.trace_id for r in roots} <= served
            return spans if done else None

        spans = wait_for(server_spans_of_both, timeout=60, message="both jobs' traces exported")
        stats = server.stats()

    traces = {job_id: _trace_of(spans, job_id) for job_id in job_ids}
    assert len(set(traces.values())) == 2, "one trace per job"
    seen_in_meta = {tp.split("-")[1] for tp in stats["tool_call_traceparents"]}
    for job_id, trace_id in traces.items():
        mine = [s for s in spans if s.trace_id == trace_id]
        assert {s.service for s in mine} == {"doclane-cli", "doclane-worker", "fake-docling-mcp"}
        ours = [s for s in mine if s.service != "fake-docling-mcp"]
        assert all(s.attributes.get(JOB_ID) == str(job_id) for s in ours), "every span names it"
        (attempt,) = [s for s in mine if s.name == "doclane.job.attempt"]
        assert (
            attempt.service == "doclane-worker" and attempt.attributes["doclane.job.attempt"] == 1
        )
        calls = [s for s in ours if s.attributes.get("mcp.method.name") == "tools/call"]
        assert calls, "the worker's MCP tool calls are in the job's trace"
        for call in calls:
            tool = call.attributes["gen_ai.tool.name"]
            assert call.name == f"tools/call {tool}"
            assert call.attributes["jsonrpc.request.id"]
            assert call.attributes.get("mcp.session.id") or call.attributes.get(
                "mcp.protocol.version"
            )
        # The store's writes: in the job's trace, or (a round stores its members' results in
        # one transaction) in a span of another member's trace that links to this one.
        stores = [s for s in spans if s.name.startswith("doclane.store ")]
        assert any(s.trace_id == trace_id and s.attributes[JOB_ID] for s in stores) or any(
            s.name == "doclane.round.store"
            and trace_id in s.links
            and str(job_id) in s.attributes["doclane.job.ids"]
            for s in spans
        ), [(s.service, s.name) for s in mine]
        served = [s for s in mine if s.service == "fake-docling-mcp"]
        assert {s.parent_span_id for s in served} <= {c.span_id for c in calls}
        assert trace_id in seen_in_meta, "the server saw the job's trace id in params._meta"
