"""Arguments checked against inputSchema (E203) and output against outputSchema (E311)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from errors import InvalidParams, OutputSchemaMismatch
from pipeline.mcp.client import McpClient
from pipeline.mcp.protocol import Tool
from tests.support.scripted_mcp import ScriptedServer, response, text_result

DOCLING_CONVERT = Tool.from_wire(
    {
        "name": "convert_document_into_docling_document",
        "inputSchema": {
            "type": "object",
            "properties": {"source": {"type": "string", "title": "Source"}},
            "required": ["source"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"from_cache": {"type": "boolean"}, "document_key": {"type": "string"}},
            "required": ["from_cache", "document_key"],
        },
    }
)


@pytest.mark.parametrize(
    ("arguments", "field", "text"),
    [
        ({}, "source", "missing required argument 'source'"),
        ({"source": 123}, "source", "argument 'source': 123 is not of type 'string'"),
    ],
)
def test_bad_arguments_are_E203_naming_the_field(
    arguments: dict[str, Any], field: str, text: str
) -> None:
    with pytest.raises(InvalidParams) as caught:
        DOCLING_CONVERT.check_arguments(arguments)
    assert caught.value.code == "E203"
    assert text in caught.value.message
    assert caught.value.detail["field"] == field


def test_nested_fields_are_named_by_path() -> None:
    tool = Tool.from_wire(
        {
            "name": "export",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "options": {
                        "type": "object",
                        "properties": {"max_size": {"type": "integer", "minimum": 1}},
                    }
                },
            },
        }
    )
    with pytest.raises(InvalidParams) as caught:
        tool.check_arguments({"options": {"max_size": 0}})
    assert caught.value.detail["field"] == "options.max_size"
    assert "'options.max_size'" in caught.value.message


def test_good_and_extra_arguments_pass() -> None:
    DOCLING_CONVERT.check_arguments({"source": "/data/a.docx"})
    DOCLING_CONVERT.check_arguments({"source": "/data/a.docx", "extra": 1})


def test_an_invalid_server_schema_is_logged_not_enforced(caplog: pytest.LogCaptureFixture) -> None:
    tool = Tool.from_wire({"name": "odd", "inputSchema": {"type": "no-such-type"}})
    with caplog.at_level(logging.WARNING, logger="doclane.mcp.schemas"):
        tool.check_arguments({"anything": True})
    assert "not enforced" in caplog.text


def test_structured_output_is_checked() -> None:
    DOCLING_CONVERT.check_output({"from_cache": False, "document_key": "abc"})
    with pytest.raises(OutputSchemaMismatch) as caught:
        DOCLING_CONVERT.check_output({"from_cache": "no", "document_key": "abc"})
    assert caught.value.code == "E311" and caught.value.detail["field"] == "from_cache"
    with pytest.raises(OutputSchemaMismatch, match="no structuredContent"):
        DOCLING_CONVERT.check_output(None)


def test_tools_without_output_schema_accept_anything() -> None:
    tool = Tool.from_wire({"name": "thumb", "inputSchema": {"type": "object"}})
    tool.check_output(None)
    tool.check_output({"whatever": 1})


def test_client_refuses_bad_arguments_without_sending(
    client: McpClient, server: ScriptedServer
) -> None:
    with pytest.raises(InvalidParams, match="'times'"):
        client.call_tool("echo", {"text": "x", "times": 0})
    assert server.sent("tools/call") == []


def test_client_checks_output_of_successful_results_only(
    client: McpClient, server: ScriptedServer
) -> None:
    server.scripts["echo"] = lambda name, args, request: [
        response(request["id"], text_result("x", {"echo": 42}))
    ]
    with pytest.raises(OutputSchemaMismatch, match="'echo'"):
        client.call_tool("echo", {"text": "x"})
    server.scripts["echo"] = lambda name, args, request: [
        response(request["id"], text_result("Error executing tool echo", is_error=True))
    ]
    result = client.call_tool("echo", {"text": "x"})  # no structuredContent, but isError
    assert result.is_error and result.structured is None


def test_structured_content_is_preferred(client: McpClient) -> None:
    result = client.call_tool("echo", {"text": "ab", "times": 2})
    assert result.structured == {"echo": "abab"}
    assert result.text == "abab"
    assert result.to_dict()["structured"] == {"echo": "abab"}
