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
    from pipeline.mcp._auth import ApiKeyAuth as ApiKeyAuth
    from pipeline.mcp._auth import BearerAuth as BearerAuth
    from pipeline.mcp._auth import auth_from_settings as auth_from_settings
    from pipeline.mcp._batch import CallOutcome as CallOutcome
    from pipeline.mcp._batch import ToolCall as ToolCall
    from pipeline.mcp._client import McpClient as McpClient
    from pipeline.mcp._connect import transport_for as transport_for
    from pipeline.mcp._http import StreamableHttpTransport as StreamableHttpTransport
    from pipeline.mcp._lifecycle import LifecycleState as LifecycleState
    from pipeline.mcp._lifecycle import Transition as Transition
    from pipeline.mcp._lifecycle import format_trail as format_trail
    from pipeline.mcp._oauth import ClientCredentials as ClientCredentials
    from pipeline.mcp._oauth import OAuthClientCredentials as OAuthClientCredentials
    from pipeline.mcp._oauth import TokenSource as TokenSource
    from pipeline.mcp._oauth import forget_tokens as forget_tokens
    from pipeline.mcp._protocol import LATEST_PROTOCOL_VERSION as LATEST_PROTOCOL_VERSION
    from pipeline.mcp._protocol import SUPPORTED_PROTOCOL_VERSIONS as SUPPORTED_PROTOCOL_VERSIONS
    from pipeline.mcp._protocol import LogMessage as LogMessage
    from pipeline.mcp._protocol import Progress as Progress
    from pipeline.mcp._protocol import ServerInfo as ServerInfo
    from pipeline.mcp._protocol import Tool as Tool
    from pipeline.mcp._protocol import ToolResult as ToolResult
    from pipeline.mcp._registry import RegistryStats as RegistryStats
    from pipeline.mcp._stdio import StdioTransport as StdioTransport
    from pipeline.mcp._timeouts import CallTimeouts as CallTimeouts
    from pipeline.mcp._transport import Binding as Binding
    from pipeline.mcp._transport import MessageSink as MessageSink
    from pipeline.mcp._transport import Outgoing as Outgoing
    from pipeline.mcp._transport import Reply as Reply
    from pipeline.mcp._transport import Transport as Transport
    from pipeline.mcp._watchdog import CancelScope as CancelScope
    from pipeline.mcp.endpoints import is_stdio as is_stdio
    from pipeline.mcp.endpoints import normalize_endpoint as normalize_endpoint
    from pipeline.mcp.endpoints import origin_of as origin_of
    from pipeline.mcp.endpoints import stdio_endpoint as stdio_endpoint
    from pipeline.mcp.settings import McpSettings as McpSettings
    from pipeline.mcp.settings import check_no_auth_for_stdio as check_no_auth_for_stdio

#: Every name is imported on first use (:mod:`pipeline.support.lazy`): a process that only reads
#: ``McpSettings`` (a publisher's time limits) loads no client, and one that never
#: authenticates loads no OAuth library (authlib, joserfc, cryptography: a quarter of a second).
if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
