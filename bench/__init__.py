"""doclane's benchmarks: one module per bench, each a program with a ``main()``.

Run them from the repository root as modules, e.g. ``.venv/bin/python -m bench.enqueue --smoke``
(docs/benchmarks.md lists every command and the figures). What several benches share (starting
servers, workers and scratch databases, corpora, CPU clocks, waiting on jobs) is bench.harness;
a bench never imports another bench, and tests only run a bench's entry point
(tests/fixtures/benches.py).
"""
