"""Plain modules (no pytest) that test modules share, and that the test fixtures and the benches
of bench/ both use.

A test module stands alone: what several need (jobs built in the store, a scripted MCP server,
the network tests' hosts) is here, never in one of them. A test fixture is a pytest thing; a
bench is a program. What both need to start (the fake Docling MCP server as a process, a Redis
database claimed for a broker) and where the heavy tools live is here, so neither imports the
other.
"""
