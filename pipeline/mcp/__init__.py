"""doclane's MCP client: Streamable HTTP to a Docling MCP server, or stdio to a child process.

::

    from pipeline.mcp.batch import ToolCall
    from pipeline.mcp.client import McpClient

    with McpClient(settings=read_settings().mcp) as client:  # pipeline.settings
        client.initialize()                            # E305 / E302 / E310 ...
        result = client.call_tool("convert_document_into_docling_document",
                                  {"source": "/data/report.docx"}, size_bytes=48_213)
        if result.is_error:                            # tool errors are results
            raise errors.classify(result.raw, stage="convert")   # E306

The client is handed its transport, or builds the one its endpoint needs with
``transport_for(endpoint, settings)`` (``connect``): Streamable HTTP, or stdio for
``stdio:<command>``::

    client = McpClient(settings=settings, transport=transport_for(endpoint, settings))

A ``CancelScope`` (``watchdog``) withdraws every request made inside it, from another thread::

    with CancelScope() as scope:        # scope.cancel("job cancelled") from the lease thread
        client.call_tool(...)           # -> errors.CallCancelled, notifications/cancelled sent

This ``__init__`` imports nothing (docs/architecture.md): importers name the module, so a
process that only reads ``McpSettings`` (``pipeline.mcp.settings``, a publisher's time limits)
loads no client, and one that never authenticates loads no OAuth library (authlib, joserfc,
cryptography: a quarter of a second). The modules callers use have plain names: ``client``
(``McpClient``), ``batch`` (``ToolCall``, ``CallOutcome``), ``protocol`` (``ToolResult``,
``Tool``, ``ServerInfo``, ``Progress``, ``LogMessage``, the protocol versions), ``connect``
(``transport_for``), ``streamable_http`` and ``stdio`` (the transports), ``transport`` (the
transport protocol), ``auth`` and ``oauth`` (credentials), ``lifecycle`` (``LifecycleState``,
``format_trail``), ``timeouts`` (``CallTimeouts``), ``registry`` (``RegistryStats``),
``watchdog`` (``CancelScope``), ``endpoints``, ``conformance`` and ``settings``; the underscored
ones (session, handshake, revisions, schemas, the child process, large replies, OAuth discovery
and keys) are the client's insides. Foreign exceptions (httpx, httpx-sse, jsonschema) never
leave the package: callers catch ``errors.PipelineError`` and read its code and flags.
"""
