"""doclane's MCP client: Streamable HTTP to a Docling MCP server, or stdio to a child process.

::

    from pipeline.mcp import McpClient, ToolCall

    with McpClient(settings=read_settings().mcp) as client:  # pipeline.settings
        client.initialize()                            # E305 / E302 / E310 ...
        result = client.call_tool("convert_document_into_docling_document",
                                  {"source": "/data/report.docx"}, size_bytes=48_213)
        if result.is_error:                            # tool errors are results
            raise errors.classify(result.raw, stage="convert")   # E306

The client is handed its transport, or builds the one its endpoint needs with
``transport_for(endpoint, settings)`` (Streamable HTTP, or stdio for ``stdio:<command>``)::

    client = McpClient(settings=settings, transport=transport_for(endpoint, settings))

A ``CancelScope`` withdraws every request made inside it, from another thread::

    with CancelScope() as scope:        # scope.cancel("job cancelled") from the lease thread
        client.call_tool(...)           # -> errors.CallCancelled, notifications/cancelled sent

Modules with a leading underscore are private; what is listed here is the API. Foreign
exceptions (httpx, httpx-sse, jsonschema) never leave the package: callers catch
``errors.PipelineError`` and read its code and flags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from pipeline.mcp._auth import ApiKeyAuth, BearerAuth, auth_from_settings
    from pipeline.mcp._batch import CallOutcome, ToolCall
    from pipeline.mcp._client import McpClient
    from pipeline.mcp._connect import transport_for
    from pipeline.mcp._http import StreamableHttpTransport
    from pipeline.mcp._lifecycle import LifecycleState, Transition, format_trail
    from pipeline.mcp._oauth import (
        ClientCredentials,
        OAuthClientCredentials,
        TokenSource,
        forget_tokens,
    )
    from pipeline.mcp._protocol import (
        LATEST_PROTOCOL_VERSION,
        SUPPORTED_PROTOCOL_VERSIONS,
        LogMessage,
        Progress,
        ServerInfo,
        Tool,
        ToolResult,
    )
    from pipeline.mcp._registry import RegistryStats
    from pipeline.mcp._stdio import StdioTransport
    from pipeline.mcp._timeouts import CallTimeouts
    from pipeline.mcp._transport import Binding, MessageSink, Reply, Transport
    from pipeline.mcp._watchdog import CancelScope
    from pipeline.mcp.endpoints import is_stdio, normalize_endpoint, origin_of, stdio_endpoint
    from pipeline.mcp.settings import McpSettings, check_no_auth_for_stdio

#: Every name is imported on first use (:mod:`pipeline.support.lazy`): a process that only reads
#: ``McpSettings`` (a publisher's time limits) loads no client, and one that never
#: authenticates loads no OAuth library (authlib, joserfc, cryptography: a quarter of a second).
__getattr__ = lazy.exports(
    __name__,
    {
        "ApiKeyAuth": "._auth",
        "BearerAuth": "._auth",
        "auth_from_settings": "._auth",
        "CallOutcome": "._batch",
        "ToolCall": "._batch",
        "McpClient": "._client",
        "transport_for": "._connect",
        "StreamableHttpTransport": "._http",
        "LifecycleState": "._lifecycle",
        "Transition": "._lifecycle",
        "format_trail": "._lifecycle",
        "ClientCredentials": "._oauth",
        "OAuthClientCredentials": "._oauth",
        "TokenSource": "._oauth",
        "forget_tokens": "._oauth",
        "LATEST_PROTOCOL_VERSION": "._protocol",
        "SUPPORTED_PROTOCOL_VERSIONS": "._protocol",
        "LogMessage": "._protocol",
        "Progress": "._protocol",
        "ServerInfo": "._protocol",
        "Tool": "._protocol",
        "ToolResult": "._protocol",
        "RegistryStats": "._registry",
        "StdioTransport": "._stdio",
        "CallTimeouts": "._timeouts",
        "Binding": "._transport",
        "MessageSink": "._transport",
        "Reply": "._transport",
        "Transport": "._transport",
        "CancelScope": "._watchdog",
        "McpSettings": ".settings",
        "check_no_auth_for_stdio": ".settings",
        "is_stdio": ".endpoints",
        "normalize_endpoint": ".endpoints",
        "origin_of": ".endpoints",
        "stdio_endpoint": ".endpoints",
    },
)


__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "ApiKeyAuth",
    "BearerAuth",
    "Binding",
    "CallOutcome",
    "CallTimeouts",
    "CancelScope",
    "ClientCredentials",
    "LifecycleState",
    "LogMessage",
    "McpClient",
    "McpSettings",
    "MessageSink",
    "OAuthClientCredentials",
    "Progress",
    "RegistryStats",
    "Reply",
    "ServerInfo",
    "StdioTransport",
    "StreamableHttpTransport",
    "TokenSource",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Transition",
    "Transport",
    "auth_from_settings",
    "check_no_auth_for_stdio",
    "forget_tokens",
    "format_trail",
    "is_stdio",
    "normalize_endpoint",
    "origin_of",
    "stdio_endpoint",
    "transport_for",
]
