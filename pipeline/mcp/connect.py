"""Which transport an endpoint needs, built from the settings: the client is handed the result.

As in the MCP SDK, the client does not know how bytes travel: ``McpClient`` takes any
:class:`~.transport.Transport`, and builds one with :func:`transport_for` only when it is given
none. A ``stdio:<command line>`` endpoint gets a :class:`~.stdio.StdioTransport` (the server
as a child of this process); anything else a
:class:`~.streamable_http.StreamableHttpTransport`, with the auth the settings ask for unless
the caller brings its own. Credentials mean nothing to a child process, so a stdio endpoint
ignores ``auth`` (settings that name both a command and an auth are refused where they are
read: ``check_no_auth_for_stdio``).
"""

from __future__ import annotations

import httpx

from pipeline.mcp.auth import auth_from_settings
from pipeline.mcp.endpoints import is_stdio
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.stdio import StdioTransport
from pipeline.mcp.streamable_http import StreamableHttpTransport
from pipeline.mcp.timeouts import CallTimeouts
from pipeline.mcp.transport import Transport


def transport_for(
    endpoint: str,
    settings: McpSettings,
    *,
    auth: httpx.Auth | None = None,
    connect_timeout: float | None = None,
) -> Transport:
    """The transport for ``endpoint`` (used exactly as given), sized by ``settings``.

    ``auth`` defaults to what the settings ask for (``DOCLING_MCP_AUTH``) for this endpoint;
    ``connect_timeout`` to the settings' connect timeout.
    """
    if is_stdio(endpoint):
        return StdioTransport.from_endpoint(
            endpoint,
            max_reply_bytes=settings.max_reply_bytes,
            grace_s=settings.stdio_grace_s,
        )
    if connect_timeout is None:
        connect_timeout = CallTimeouts.from_settings(settings).connect_s
    return StreamableHttpTransport(
        endpoint,
        auth=auth if auth is not None else auth_from_settings(settings, endpoint),
        connect_timeout=connect_timeout,
        default_retry_ms=settings.sse_retry_ms,
        resume_attempts=settings.resume_attempts,
        max_connections=settings.max_connections,
        max_reply_bytes=settings.max_reply_bytes,
    )
