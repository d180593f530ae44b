"""The MCP and JSON-RPC shapes the client reads and writes, and nothing else.

Messages stay plain dicts on the wire side (they are what the server sent, and ``raw`` keeps
them for job rows); the few things the client decides on (the ``initialize`` answer, a tool's
schemas, a tool result) get small frozen classes built by ``from_wire`` functions that raise
E200 for a shape no MCP server would send, so a confused reply fails loudly at the border.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final, Literal

from jsonschema.protocols import Validator

from errors import ParseError
from pipeline.mcp._schemas import check_arguments, check_output, compile_schema

JsonObject = dict[str, Any]
RequestId = int | str

#: What the client asks for unless ``MCP_PROTOCOL_VERSION`` says otherwise.
LATEST_PROTOCOL_VERSION: Final = "2025-11-25"
#: Server answers the client accepts, newest first. Anything else is E305.
SUPPORTED_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")

MessageKind = Literal["request", "notification", "response", "error"]


def request_message(request_id: RequestId, method: str, params: Mapping[str, Any]) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}


def notification_message(method: str, params: Mapping[str, Any] | None = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def result_message(request_id: RequestId, result: Mapping[str, Any]) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": dict(result)}


def error_message(request_id: RequestId, code: int, message: str) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def message_kind(message: Mapping[str, Any]) -> MessageKind:
    """Which of the four JSON-RPC messages this is; E200 for anything else."""
    if isinstance(message.get("method"), str):
        return "request" if "id" in message else "notification"
    if "id" in message:
        if "error" in message:
            return "error"
        if "result" in message:
            return "response"
    raise ParseError(f"not a JSON-RPC message: {_excerpt(message)}")


def parse_json_messages(text: str | bytes | bytearray, where: str) -> list[JsonObject]:
    """One JSON-RPC message, or a batch of them, from a reply body or an SSE ``data`` field."""
    try:
        decoded = json.loads(text)
    except ValueError as exc:
        raise unparseable(where, exc) from exc
    return json_messages(decoded, where)


def unparseable(where: str, exc: ValueError) -> ParseError:
    """E200 for bytes that are not JSON (the parser's first line says where)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ParseError(f"unparseable JSON in {where}: {reason}")


def json_messages(decoded: Any, where: str) -> list[JsonObject]:
    """The messages of a decoded reply; E200 unless it is one message or a batch of them."""
    items = decoded if isinstance(decoded, list) else [decoded]
    if not items or not all(isinstance(item, dict) for item in items):
        raise ParseError(f"{where} is not a JSON-RPC message: {_excerpt(decoded)}")
    return items


def _excerpt(value: object, limit: int = 200) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server said about itself in its ``initialize`` answer."""

    protocol_version: str
    capabilities: Mapping[str, Any]
    name: str = ""
    version: str = ""
    instructions: str | None = None

    @property
    def has_tools(self) -> bool:
        return isinstance(self.capabilities.get("tools"), Mapping)

    @property
    def announces_list_changed(self) -> bool:
        tools = self.capabilities.get("tools")
        return isinstance(tools, Mapping) and tools.get("listChanged") is True

    @classmethod
    def from_wire(cls, result: Mapping[str, Any]) -> ServerInfo:
        version = result.get("protocolVersion")
        capabilities = result.get("capabilities", {})
        if not isinstance(version, str) or not isinstance(capabilities, Mapping):
            raise ParseError(f"malformed initialize result: {_excerpt(dict(result))}")
        info = result.get("serverInfo")
        info = info if isinstance(info, Mapping) else {}
        instructions = result.get("instructions")
        return cls(
            protocol_version=version,
            capabilities=dict(capabilities),
            name=str(info.get("name", "")),
            version=str(info.get("version", "")),
            instructions=instructions if isinstance(instructions, str) else None,
        )


@dataclass(frozen=True, eq=False)
class Tool:
    """One entry of ``tools/list``, with its schemas compiled once, on first use."""

    name: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    description: str = ""
    title: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, item: object) -> Tool:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ParseError(f"malformed tool in tools/list: {_excerpt(item)}")
        input_schema = item.get("inputSchema", {"type": "object"})
        output_schema = item.get("outputSchema")
        if not isinstance(input_schema, Mapping) or not (
            output_schema is None or isinstance(output_schema, Mapping)
        ):
            raise ParseError(f"malformed schemas of tool {item['name']!r}")
        title = item.get("title")
        return cls(
            name=item["name"],
            input_schema=dict(input_schema),
            output_schema=dict(output_schema) if output_schema is not None else None,
            description=str(item.get("description") or ""),
            title=title if isinstance(title, str) else None,
            raw=dict(item),
        )

    @cached_property
    def summary(self) -> str:
        """The description's first line, for listings."""
        return self.description.strip().splitlines()[0] if self.description.strip() else ""

    @cached_property
    def _input_validator(self) -> Validator | None:
        return compile_schema(self.input_schema, f"{self.name} inputSchema")

    @cached_property
    def _output_validator(self) -> Validator | None:
        return compile_schema(self.output_schema, f"{self.name} outputSchema")

    def check_arguments(self, arguments: Mapping[str, Any]) -> None:
        """E203 when ``arguments`` break the ``inputSchema``, naming the field."""
        check_arguments(self._input_validator, self.name, arguments)

    def check_output(self, structured: Any) -> None:
        """E311 when a successful result breaks the ``outputSchema`` (if the tool has one)."""
        check_output(self._output_validator, self.name, structured)

    def to_dict(self) -> JsonObject:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
            "outputSchema": dict(self.output_schema) if self.output_schema is not None else None,
        }


def tools_page(result: Mapping[str, Any]) -> tuple[list[Tool], str | None]:
    """The tools and the ``nextCursor`` of one ``tools/list`` page."""
    items = result.get("tools")
    if not isinstance(items, list):
        raise ParseError(f"tools/list result without a tools array: {_excerpt(dict(result))}")
    cursor = result.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        raise ParseError(f"tools/list nextCursor is not a string: {cursor!r}")
    return [Tool.from_wire(item) for item in items], cursor or None


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned. A tool that failed is a result with ``is_error``, not a raise.

    ``structured`` is the ``structuredContent`` (checked against the tool's ``outputSchema``
    when it has one); ``raw`` is the whole wire result, which ``errors.classify`` reads to turn
    an ``isError`` result into E306/E307 (less, in a reply of megabytes, a text block that was
    ``structuredContent`` again as JSON: see ``pipeline.mcp._large_reply``).
    """

    tool: str
    content: list[JsonObject]
    structured: JsonObject | None
    is_error: bool
    raw: JsonObject = field(repr=False)
    duration: float = 0.0

    @property
    def text(self) -> str:
        """Every text block, joined by newlines (the only cause a failing Docling tool gives)."""
        return "\n".join(
            str(block.get("text", "")) for block in self.content if block.get("type") == "text"
        )

    def to_dict(self) -> JsonObject:
        """A JSON-ready view for ``--json`` output."""
        return {
            "tool": self.tool,
            "is_error": self.is_error,
            "structured": self.structured,
            "content": self.content,
            "duration_s": round(self.duration, 6),
        }

    @classmethod
    def from_wire(cls, tool: str, result: Mapping[str, Any], duration: float) -> ToolResult:
        content = result.get("content", [])
        structured = result.get("structuredContent")
        is_error = result.get("isError", False)
        if (
            not isinstance(content, list)
            or not all(isinstance(block, dict) for block in content)
            or not (structured is None or isinstance(structured, dict))
            or not isinstance(is_error, bool)
        ):
            raise ParseError(f"malformed result of tool {tool!r}: {_excerpt(dict(result))}")
        return cls(
            tool=tool,
            content=content,
            structured=structured,
            is_error=is_error,
            raw=dict(result),
            duration=duration,
        )


@dataclass(frozen=True, slots=True)
class Progress:
    """A ``notifications/progress`` the server sent during a call."""

    token: RequestId
    progress: float
    total: float | None = None
    message: str | None = None

    @classmethod
    def from_wire(cls, params: Mapping[str, Any]) -> Progress | None:
        token, progress = params.get("progressToken"), params.get("progress")
        if not isinstance(token, int | str) or not isinstance(progress, int | float):
            return None
        total, message = params.get("total"), params.get("message")
        return cls(
            token=token,
            progress=float(progress),
            total=float(total) if isinstance(total, int | float) else None,
            message=message if isinstance(message, str) else None,
        )


@dataclass(frozen=True, slots=True)
class LogMessage:
    """A ``notifications/message`` (MCP logging) the server sent."""

    level: str
    data: Any
    logger: str | None = None

    @classmethod
    def from_wire(cls, params: Mapping[str, Any]) -> LogMessage:
        logger = params.get("logger")
        return cls(
            level=str(params.get("level", "info")),
            data=params.get("data"),
            logger=logger if isinstance(logger, str) else None,
        )
