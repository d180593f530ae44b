"""The seam between the JSON-RPC session and the wire: a tiny protocol any transport implements.

The session hands a transport one outgoing message and a *sink*; the transport delivers every
message the server sends back for it (notifications, server requests, the response) to the
sink, in order, until the sink says the awaited response has arrived. How the bytes travel
(Streamable HTTP POST + SSE + resumption in :mod:`.streamable_http`, one line per message to a child
process in :mod:`.stdio`, a scripted fake in unit tests) is the transport's business; which
message answers which request is the session's. :func:`.connect.transport_for` picks the one
an endpoint needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pipeline.mcp.protocol import JsonObject
from pipeline.mcp.watchdog import CancelScope

#: Receives one incoming message; returns True once the awaited response has been delivered.
MessageSink = Callable[[JsonObject], bool]


def describe_message(message: JsonObject) -> str:
    """How errors and logs name a message: ``tools/call convert_... (id 7)``, ``ping (id 3)``."""
    method = message.get("method")
    if method == "tools/call":
        params = message.get("params") or {}
        return f"tools/call {params.get('name')} (id {message.get('id')})"
    if method is not None:
        return f"{method} (id {message['id']})" if "id" in message else str(method)
    return f"answer to server request {message.get('id')}"


def ignore_messages(_message: JsonObject) -> bool:
    """The sink for messages that expect no answer (notifications, our responses)."""
    return False


@dataclass(frozen=True, slots=True)
class Binding:
    """What ties a request to one server session: its id and the negotiated protocol version.

    A binding is replaced as a whole when a session is (re-)established, so a request always
    carries a consistent pair, and a request that fails with the *old* binding can tell that a
    newer one already exists.
    """

    session_id: str | None = None
    protocol_version: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What the transport learned from the reply's envelope (status and session header)."""

    status: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message for a transport to send, and how to take what comes back for it.

    ``timeout`` is a deadline for the whole exchange, whatever the server sends meanwhile;
    ``sink`` gets every message that comes back for a request; ``cancel`` ends the exchange at
    once from another thread (``CallCancelled``); ``headers`` are the request's own (the
    2026-07-28 routing headers), on transports that have headers.
    """

    message: JsonObject
    binding: Binding
    timeout: float
    sink: MessageSink = ignore_messages
    cancel: CancelScope | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def begin(self) -> str:
        """The message's name in errors and logs, once it is known not withdrawn already."""
        what = describe_message(self.message)
        if self.cancel is not None:
            self.cancel.check(what)
        return what


class Transport(Protocol):
    """One connection to one MCP endpoint, shared by every thread of a client."""

    @property
    def endpoint(self) -> str: ...

    def post(self, outgoing: Outgoing) -> Reply:
        """Send the message; for a request, deliver what comes back to its sink until it is done.

        Raises a catalog error: E302 (unreachable, 5xx, 429, stream lost for good), E303 (no
        answer within ``timeout``), E308 (HTTP 404 for ``binding.session_id``), E310
        (401/403), E312 (reply over the size limit), E200 (unparseable reply), or the JSON-RPC
        error an HTTP error body carried.
        """
        ...

    def delete(self, binding: Binding) -> None:
        """End the session on the server (best effort: 404 and 405 are not errors)."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...
