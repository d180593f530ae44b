"""The stateless 2026-07-28 revision: discovery, and what every request must carry.

A 2026-07-28 server keeps no session. The client learns what the server is with
``server/discover`` (supported versions, capabilities, its identity in ``_meta``), and every
request then carries the request metadata in ``params._meta`` (protocol version, client
identity, client capabilities) and, over HTTP, routing headers the server checks against the
body: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` (the tool called), and one
``Mcp-Param-<token>`` per argument whose input schema property carries ``x-mcp-header``.
Cancellation has no notification on this wire: ending the request's connection is the signal.

Schemas are kept as given (JSON Schema 2020-12): walking one for ``x-mcp-header`` follows the
applicator keywords only and never dereferences ``$ref``, over the network or otherwise.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pipeline.mcp.protocol import JsonObject, Tool

MODERN_VERSION: Final = "2026-07-28"
AUTO: Final = "auto"

PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"

METHOD_HEADER: Final = "Mcp-Method"
NAME_HEADER: Final = "Mcp-Name"
PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
X_MCP_HEADER: Final = "x-mcp-header"

#: JSON-RPC error of a server that does not speak the version a request asked for.
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: Method -> the params key mirrored as ``Mcp-Name``.
NAME_BEARING: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
}

#: Property path -> ``Mcp-Param-`` header token, as a tool's input schema declares them.
HeaderDeclarations = dict[tuple[str, ...], str]

_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
_B64_SENTINEL = re.compile(r"^=\?base64\?.*\?=$")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SINGLE = frozenset(
    {"items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames",
     "unevaluatedProperties", "not", "if", "then", "else", "contentSchema"}
)  # fmt: skip
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAPS = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


@dataclass(frozen=True, slots=True)
class Discovery:
    """What ``server/discover`` said."""

    versions: tuple[str, ...]
    capabilities: JsonObject
    server_info: JsonObject

    @classmethod
    def from_wire(cls, result: JsonObject) -> Discovery:
        versions = result.get("supportedVersions")
        capabilities = result.get("capabilities")
        meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
        info = meta.get(SERVER_INFO_META) if isinstance(meta, dict) else None
        return cls(
            versions=tuple(v for v in versions if isinstance(v, str))
            if isinstance(versions, list)
            else (),
            capabilities=capabilities if isinstance(capabilities, dict) else {},
            server_info=info if isinstance(info, dict) else {},
        )


def stamp(message: JsonObject, version: str, client_info: JsonObject) -> dict[str, str]:
    """Put the request metadata into ``message`` and return its routing headers."""
    params = message.setdefault("params", {})
    meta = params.setdefault("_meta", {})
    meta[PROTOCOL_VERSION_META] = version
    meta[CLIENT_INFO_META] = client_info
    meta[CLIENT_CAPABILITIES_META] = {}
    method = str(message.get("method", ""))
    headers = {METHOD_HEADER: method}
    name_key = NAME_BEARING.get(method)
    if name_key is not None and isinstance(name := params.get(name_key), str):
        headers[NAME_HEADER] = encode_header_value(name)
    return headers


def param_headers(declarations: HeaderDeclarations, arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-<token>`` for each argument whose schema property declares ``x-mcp-header``
    (strings, integers and booleans; absent or null values send no header). ``declarations``
    are :func:`header_declarations` of the tool's input schema, found once per tool."""
    headers: dict[str, str] = {}
    for path, token in declarations.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None or isinstance(value, dict | list | float):
            continue
        rendered = ("true" if value else "false") if isinstance(value, bool) else str(value)
        headers[PARAM_HEADER_PREFIX + token] = encode_header_value(rendered)
    return headers


class ParamHeaders:
    """The ``Mcp-Param-*`` headers of calls, each tool's declarations found once per tool
    definition (walking its schema on every call cost more than the rest of the request's
    stamping); a tool redefined by a new listing is walked again."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[Tool, HeaderDeclarations]] = {}

    def for_call(self, tool: Tool, arguments: Mapping[str, Any]) -> dict[str, str]:
        known = self._known.get(tool.name)
        if known is None or known[0] is not tool:
            known = (tool, header_declarations(tool.input_schema))
            self._known[tool.name] = known
        return param_headers(known[1], arguments)


def header_declarations(input_schema: Any) -> HeaderDeclarations:
    """Property path -> header token, for properties reachable through ``properties`` only."""
    found: dict[tuple[str, ...], str] = {}
    for path, schema in _positions(input_schema):
        token = schema.get(X_MCP_HEADER)
        if path and isinstance(token, str) and _TOKEN.fullmatch(token):
            found[path] = token
    return found


def invalid_header_declaration(input_schema: Any) -> str | None:
    """Why a tool's ``x-mcp-header`` declarations are unusable (None when they are fine):
    a token that is no HTTP field name, one token twice (case-insensitively), or a
    declaration on a property of a type that cannot be a header (only string, integer and
    boolean can)."""
    seen: set[str] = set()
    for path, schema in _positions(input_schema):
        token = schema.get(X_MCP_HEADER)
        if token is None or not path:
            continue
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            return f"x-mcp-header {token!r} at {'.'.join(path)} is not a header name"
        if token.lower() in seen:
            return f"x-mcp-header {token!r} is declared twice"
        seen.add(token.lower())
        kind = schema.get("type")
        if kind not in ("string", "integer", "boolean"):
            return f"x-mcp-header {token!r} is on a property of type {kind!r}"
    return None


def encode_header_value(value: str) -> str:
    """Printable ASCII as it is; anything else base64-wrapped, so the server recovers it."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not _B64_SENTINEL.match(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def _positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every schema position, with its chain of ``properties`` keys (None once another
    applicator was crossed). ``$ref`` is never followed."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif keyword in _SINGLE:
                stack.append((None, value))
            elif keyword in _LISTS and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _MAPS and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())
