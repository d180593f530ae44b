"""``call_tools``: request order, partial failures as outcomes, parallelism, batch timeout."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from errors import CallTimeout, InvalidParams, UnknownTool
from pipeline.mcp.batch import ToolCall
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from tests.support.scripted_mcp import MakeClient, ScriptedServer, echo_tool, timing_out


def test_sequential_results_in_request_order_with_partial_failures(client: McpClient) -> None:
    calls = [
        ToolCall("echo", {"text": "a"}),
        ToolCall("nope", {}),
        ToolCall("echo", {"times": 2}),
        ToolCall("echo", {"text": "d"}),
    ]
    outcomes = client.call_tools(calls)
    assert [o.call for o in outcomes] == calls
    assert [o.ok for o in outcomes] == [True, False, False, True]
    assert outcomes[0].result is not None and outcomes[0].result.text == "a"
    assert isinstance(outcomes[1].error, UnknownTool)
    assert isinstance(outcomes[2].error, InvalidParams)
    assert outcomes[3].result is not None and outcomes[3].result.text == "d"
    assert outcomes[1].to_dict()["error"]["code"] == "E304"


def test_sequential_batches_run_one_call_at_a_time(
    client: McpClient, server: ScriptedServer
) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def counting(name: str, arguments: dict[str, Any], request: dict[str, Any]) -> Any:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        try:
            return echo_tool(name, arguments, request)
        finally:
            with lock:
                active -= 1

    server.scripts["echo"] = counting
    client.call_tools([ToolCall("echo", {"text": str(n)}) for n in range(5)])
    assert peak == 1


def test_parallel_batches_overlap_and_keep_order(
    make_client: MakeClient, server: ScriptedServer
) -> None:
    client = make_client(settings=McpSettings(max_parallel=4))
    client.initialize()
    barrier = threading.Barrier(4, timeout=5)

    def rendezvous(name: str, arguments: dict[str, Any], request: dict[str, Any]) -> Any:
        barrier.wait()  # passes only if four calls are in flight at once
        return echo_tool(name, arguments, request)

    server.scripts["echo"] = rendezvous
    calls = [ToolCall("echo", {"text": f"t{n}"}) for n in range(8)]
    outcomes = client.call_tools(calls, parallel=True)
    assert [o.result.text for o in outcomes if o.result] == [f"t{n}" for n in range(8)]
    assert all(o.ok for o in outcomes)


def test_an_isError_result_is_an_outcome_that_is_not_ok(
    client: McpClient, server: ScriptedServer
) -> None:
    server.tools.append({"name": "broken", "inputSchema": {"type": "object"}})
    client._registry.invalidate()  # listed, but the server has no code for it: isError
    outcome = client.call_tools([ToolCall("broken", {})])[0]
    assert outcome.result is not None and outcome.result.is_error and not outcome.ok
    assert outcome.error is None


def test_batch_timeout_caps_each_call(client: McpClient, server: ScriptedServer) -> None:
    server.scripts["plain"] = timing_out
    calls = [
        ToolCall("echo", {"text": "fast"}),
        ToolCall("plain", {}),
        ToolCall("echo", {"text": "x"}),
    ]
    outcomes = client.call_tools(calls, timeout=30)
    sent = server.sent("tools/call")
    assert all(post.timeout <= 30 for post in sent)
    assert outcomes[0].ok
    assert isinstance(outcomes[1].error, CallTimeout)
    assert outcomes[2].ok


def test_a_spent_batch_times_out_calls_without_sending(
    client: McpClient, server: ScriptedServer
) -> None:
    before = len(server.sent("tools/call"))
    outcomes = client.call_tools([ToolCall("echo", {"text": "x"})] * 2, timeout=1e-9)
    assert all(isinstance(o.error, CallTimeout) for o in outcomes)
    assert len(server.sent("tools/call")) == before


def test_call_ids_are_unique_and_kept(client: McpClient) -> None:
    calls = [ToolCall("echo", {"text": "a"}), ToolCall("echo", {"text": "a"}, call_id="mine")]
    outcomes = client.call_tools(calls)
    assert calls[0].call_id != calls[1].call_id
    assert outcomes[1].to_dict()["call_id"] == "mine"


@pytest.mark.parametrize("parallel", [False, True])
def test_empty_batch(client: McpClient, parallel: bool) -> None:
    assert client.call_tools([], parallel=parallel) == []
