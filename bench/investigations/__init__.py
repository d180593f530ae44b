"""One-off investigations: benches that answered a question once and back no figure of today.

Each answered why something was slow or whether a change was worth it (Celery's floor a task,
calls after a pause, MCP calls inside a worker, a batch's proof per format, the choice among
servers, the first call after a database restart, one HTTP call's latency, stdio children
against one HTTP server, tracing's cost). docs/benchmarks.md keeps the answer in one line, in
*What we learned*; the runs are in git's history of that page. They stay runnable, as
``.venv/bin/python -m bench.investigations.<name> --help`` shows, so that the question can be
asked again when the code it measured changes; each keeps a smoke test in tests/bench/.
"""
