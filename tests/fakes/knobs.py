"""The fake server's run-time knobs: one validated model, changed by ``POST /_control/configure``.

Every knob has a default that makes the fake behave like a healthy docling-mcp 3.3.0, so a test
states only the fault it wants and ``POST /_control/reset`` brings everything back. Unknown knob
names are refused (HTTP 400) so that a typo in a test fails loudly instead of testing nothing.

Three knobs are *session-scoped* because the SDK fixes them when it admits a session:
``json_response``, ``resumable`` and ``sse_retry_ms`` apply to sessions opened after the change.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: ``fail_with`` values. ``httpNNN`` is any 4xx/5xx status, ``jsonrpc:<code>`` any JSON-RPC code.
FAULT_PATTERN = re.compile(
    r"^(?:http[45]\d\d|jsonrpc:-?\d+|is_error|bad_output|garbage|garbage_sse|drop_stream|hang)$"
)

#: Faults answered by the ASGI middleware without reaching the MCP server.
HTTP_LAYER_FAULTS = ("http", "garbage")

#: Pseudo-method names that ``fail_methods`` may hold for requests that carry no JSON-RPC body.
HTTP_VERB_METHODS = ("GET", "DELETE")


_ADVERTISE = ("header", "well-known", "none")


class Knobs(BaseModel):
    """What the fake does wrong, and how it shapes its answers."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- injected failures -------------------------------------------------------------------
    fail_next: int = Field(
        default=0, ge=-1, description="how many matching requests fail next; -1 means every one"
    )
    fail_with: str = Field(default="http500", description="the fault a matching request gets")
    fail_methods: list[str] = Field(
        default_factory=lambda: ["tools/call"],
        description="JSON-RPC methods (or GET/DELETE) the fault applies to",
    )
    fail_tools: list[str] | None = Field(
        default=None, description="limit tools/call faults to these tool names (None: every tool)"
    )
    fail_message: str | None = Field(
        default=None, description="message of an injected JSON-RPC error"
    )
    retry_after_s: int = Field(
        default=1, ge=0, description="Retry-After header value sent with http429"
    )

    # --- timing ----------------------------------------------------------------------------------
    delay_s: float = Field(
        default=0.0, ge=0, description="server-side delay inside every tool call"
    )
    delay_tools: list[str] | None = Field(default=None, description="limit delay_s to these tools")
    max_concurrent_calls: int | None = Field(
        default=None,
        ge=1,
        description="at most this many tool calls work at once (delay included); the others "
        "wait their turn, as on a server with that many conversion slots (None: no limit)",
    )

    # --- replies that keep a per-read timeout alive forever ------------------------------------
    keepalive_s: float | None = Field(
        default=None,
        gt=0,
        description="while a reply is an open SSE stream, send keep-alives this often",
    )
    keepalive_kinds: list[Literal["comment", "empty_event", "notification"]] = Field(
        default_factory=lambda: ["comment", "empty_event"],
        min_length=1,
        description="what the keep-alives are, in turn: ': ...' comments, events without data, "
        "notifications/message",
    )
    trickle_s: float | None = Field(
        default=None, gt=0, description="send reply bodies a byte at a time, this far apart"
    )
    shape_methods: list[str] = Field(
        default_factory=lambda: ["tools/call"],
        description="the requests (JSON-RPC methods, or GET for a resumed stream) whose replies "
        "keepalive_s and trickle_s shape",
    )
    oversize_reply_bytes: int | None = Field(
        default=None,
        ge=1,
        description="answer tools/call with a text result this large, streamed, never held whole",
    )
    oversize_as: Literal["sse", "json", "json_cut"] = Field(
        default="sse",
        description="the oversize reply as one SSE event, a JSON body, or a JSON body cut off "
        "before its last bytes (malformed)",
    )

    # --- the directory tool ----------------------------------------------------------------------
    dir_skip: list[str] = Field(
        default_factory=list,
        description="file names convert_directory_files_into_docling_document silently skips",
    )
    dir_order: Literal["listed", "reversed", "shuffled"] = Field(
        default="listed", description="the order the directory tool answers its keys in"
    )
    dir_seed: int = Field(default=0, description="the shuffle's seed")

    # --- reply shapes (session-scoped: apply to sessions opened after the change) -----------------
    json_response: bool = Field(
        default=False, description="plain application/json replies instead of SSE"
    )
    resumable: bool = Field(
        default=True,
        description="keep an event store: SSE priming events with ids, resumable streams",
    )
    sse_retry_ms: int | None = Field(
        default=None, ge=0, description="`retry:` field in priming events"
    )

    # --- listing ---------------------------------------------------------------------------------
    tools_page_size: int | None = Field(default=None, ge=1, description="paginate tools/list")

    # --- messages before the result -------------------------------------------------------------
    emit_progress: bool = Field(default=False, description="notifications/progress when asked for")
    emit_logging: bool = Field(
        default=False, description="a notifications/message before each result"
    )
    announce_call_start: bool = Field(
        default=False,
        description="a notifications/message as each tool call starts, before any delay: a "
        "test acts once the server holds the call instead of guessing when it will",
    )
    emit_list_changed: bool = Field(default=False, description="notifications/tools/list_changed")
    server_ping: bool = Field(
        default=False, description="send `ping` to the client during each tool call"
    )
    server_request_method: str | None = Field(
        default=None,
        description="send this request (e.g. sampling/createMessage) during each tool call",
    )
    server_request_timeout_s: float = Field(default=10.0, gt=0)

    # --- handshake -----------------------------------------------------------------------------
    stateless: bool = Field(
        default=False,
        description="serve the stateless 2026-07-28 revision (server/discover); off, the fake "
        "answers server/discover with -32601 like a server of the 2025 revisions",
    )
    no_tools_capability: bool = Field(default=False, description="declare no tools capability")
    protocol_version: str | None = Field(default=None, description="force the negotiated version")

    # --- auth ----------------------------------------------------------------------------------
    require_auth: dict[str, str] | None = Field(
        default=None,
        description='{"bearer": "tok"}, {"header": "X-API-Key", "value": "k"} or '
        '{"oauth": "<issuer URL>", "advertise": "header|well-known|none"} '
        "(tests.fakes.oauth_resource)",
    )

    # --- documents -----------------------------------------------------------------------------
    cache_max_documents: int = Field(default=10, ge=1, description="LRU size of the document cache")
    evict_next: int = Field(
        default=0,
        ge=0,
        description="empty the document cache just before the next N calls of evict_tools, as "
        "ten other conversions would between a client's convert and its export",
    )
    evict_tools: list[str] = Field(
        default_factory=lambda: ["export_docling_document_to_markdown"],
        description="the tools whose calls evict_next applies to",
    )

    @field_validator("fail_with")
    @classmethod
    def _known_fault(cls, value: str) -> str:
        if not FAULT_PATTERN.match(value):
            raise ValueError(
                "fail_with must be httpNNN, jsonrpc:<code>, is_error, bad_output, garbage, "
                "garbage_sse, "
                f"drop_stream or hang; got {value!r}"
            )
        return value

    @field_validator("require_auth")
    @classmethod
    def _auth_shape(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None or set(value) == {"bearer"} or set(value) == {"header", "value"}:
            return value
        advertise = value.get("advertise", "header")
        if "oauth" in value and set(value) <= {"oauth", "advertise"} and advertise in _ADVERTISE:
            return value
        raise ValueError(
            'require_auth is {"bearer": tok}, {"header": name, "value": secret} or '
            '{"oauth": issuer, "advertise": "header|well-known|none"}'
        )

    def updated(self, changes: dict[str, Any]) -> Knobs:
        """A new model with ``changes`` applied and validated as a whole."""
        return Knobs.model_validate({**self.model_dump(), **changes})

    def fault_applies_to(self, method: str, tool: str | None, *, is_request: bool) -> bool:
        """Whether a message of ``method`` (and ``tool`` for tools/call) is a fault target.

        HTTP-level faults hit any message (notifications, GET and DELETE too); the MCP-level ones
        (JSON-RPC error, ``isError``, hang, stream drop) need a request to answer.
        """
        if self.fail_next == 0 or method not in self.fail_methods:
            return False
        if not self.fail_with.startswith(HTTP_LAYER_FAULTS) and not is_request:
            return False
        if self.fail_with in ("is_error", "bad_output") and method != "tools/call":
            return False
        return not (
            method == "tools/call" and self.fail_tools is not None and tool not in self.fail_tools
        )

    def delays(self, tool: str) -> float:
        """The server-side delay for a call of ``tool``."""
        if self.delay_tools is not None and tool not in self.delay_tools:
            return 0.0
        return self.delay_s
