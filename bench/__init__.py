"""doclane's benchmarks: one module per bench, each a program with a ``main()``.

Two kinds. A bench at this level backs a figure of docs/benchmarks.md's table: the table cites
the one command that reproduces it, and CI runs it at a tiny size (tests/bench/, and
tests/e2e/test_bench_batches_smoke.py for the batch bench). bench/investigations/ holds the
one-off investigations, whose answers the page keeps in a line each. (``row_updates``, an
investigation of PostgreSQL's part of a job, is still at this level.) ``corpus`` builds the
real-world corpus the conversion benches read; ``rs_server`` and ``docling_serve_launch`` are
the topology bench's servers.

Run them from the repository root as modules, e.g. ``.venv/bin/python -m bench.enqueue --smoke``
or ``.venv/bin/python -m bench.investigations.celery_floor --help``. What several benches share
(starting servers, workers and scratch databases, corpora, CPU clocks, waiting on jobs) is
bench.harness; a bench never imports another bench, and tests only run a bench's entry point
(tests/fixtures/benches.py).
"""
