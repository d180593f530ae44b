"""The 2026-07-28 request stamp, routing headers and x-mcp-header declarations."""

from __future__ import annotations

import base64

from pipeline.mcp._revision import (
    CLIENT_INFO_META,
    PROTOCOL_VERSION_META,
    Discovery,
    encode_header_value,
    header_declarations,
    invalid_header_declaration,
    param_headers,
    stamp,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "nested": {
            "type": "object",
            "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
        },
        "ref": {"$ref": "https://example.invalid/schema.json#/defs/x"},
        "any": {"anyOf": [{"type": "string", "x-mcp-header": "Unreachable"}]},
    },
}


def test_a_request_is_stamped_with_its_metadata_and_routing_headers() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "convert", "arguments": {}}}  # fmt: skip
    headers = stamp(message, "2026-07-28", {"name": "doclane", "version": "1"})
    meta = message["params"]["_meta"]
    assert meta[PROTOCOL_VERSION_META] == "2026-07-28"
    assert meta[CLIENT_INFO_META] == {"name": "doclane", "version": "1"}
    assert headers == {"Mcp-Method": "tools/call", "Mcp-Name": "convert"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    assert stamp(listing, "2026-07-28", {}) == {"Mcp-Method": "tools/list"}


def test_declared_arguments_become_param_headers_and_refs_are_never_followed() -> None:
    assert header_declarations(SCHEMA) == {
        ("region",): "Region",
        ("priority",): "Priority",
        ("dry",): "Dry-Run",
        ("nested", "tenant"): "Tenant",
    }
    declared = header_declarations(SCHEMA)
    headers = param_headers(
        declared, {"region": "eu-west", "priority": 7, "dry": False, "nested": {"tenant": "ünï"}}
    )
    assert headers["Mcp-Param-Region"] == "eu-west"
    assert headers["Mcp-Param-Priority"] == "7"
    assert headers["Mcp-Param-Dry-Run"] == "false"
    tenant = headers["Mcp-Param-Tenant"]
    assert tenant.startswith("=?base64?") and base64.b64decode(tenant[9:-2]).decode() == "ünï"
    assert param_headers(declared, {"region": None}) == {}


def test_unusable_declarations_are_named() -> None:
    assert invalid_header_declaration(SCHEMA) is None
    bad_token = {"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}
    assert "not a header name" in (invalid_header_declaration(bad_token) or "")
    twice = {"properties": {"a": {"type": "string", "x-mcp-header": "X"},
                            "b": {"type": "string", "x-mcp-header": "x"}}}  # fmt: skip
    assert "declared twice" in (invalid_header_declaration(twice) or "")
    number = {"properties": {"a": {"type": "number", "x-mcp-header": "N"}}}
    assert "type 'number'" in (invalid_header_declaration(number) or "")


def test_header_values_survive_the_trip() -> None:
    assert encode_header_value("plain-ascii") == "plain-ascii"
    for awkward in (" padded ", "tab" + chr(9) + "here", "=?base64?abc?=", "é"):
        encoded = encode_header_value(awkward)
        assert encoded.startswith("=?base64?")
        assert base64.b64decode(encoded[9:-2]).decode() == awkward


def test_a_discovery_is_read_leniently() -> None:
    found = Discovery.from_wire(
        {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
         "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "docling"}}}
    )  # fmt: skip
    assert found.versions == ("2026-07-28",) and found.server_info == {"name": "docling"}
    assert Discovery.from_wire({}).versions == ()
