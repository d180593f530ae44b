"""A fake Docling MCP server for the integration tests, on the official ``mcp`` SDK.

Run it as its own process: ``python -m tests.fakes.server --port 0 [--profile docling|per-format]
[--json-response] [--url-file F] [--cache-dir D] [--cache-max-documents N] [--exit-with-parent]``;
it prints ``http://127.0.0.1:PORT/mcp`` once listening. Tests use the ``fake_server`` and
``fake_server_factory`` fixtures (tests/fixtures/fake_server.py) instead of running it by hand.

Layers, outside in:

* ``http_layer``: ASGI middleware. Counts requests, checks ``require_auth``, answers HTTP-level
  faults (``httpNNN``, ``garbage``, ``garbage_sse``) and can cut a stream short.
  ``oauth_resource`` makes it an OAuth protected resource (tokens introspected at the fake
  authorization server, ``auth_server``, which runs as a process of its own).
* the SDK's Streamable HTTP app and session manager (sessions, SSE/JSON, priming events), with
  ``event_store.FollowingEventStore`` for resumable streams.
* ``mcp_layer``: the SDK's low-level ``Server`` with a ``ServerMiddleware`` for MCP-level faults
  (``jsonrpc:<code>``, ``is_error``, ``bad_output``, ``hang``, ``drop_stream``) and the
  handshake knobs, and the tool handler (delay, notifications, server-to-client requests).
* ``profiles``: the tools (``docling`` = docling-mcp 3.3.0, ``per-format`` = the seed's eight).
* ``control``: ``/_control/*`` endpoints over ``state`` (knobs in ``knobs.Knobs``, stats, cache).
"""
