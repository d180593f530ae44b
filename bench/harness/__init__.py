"""What the benches share, so that none of them is another's library.

- ``paths``: this checkout (``ROOT``), its ``doclane`` command, the installed tools;
- ``processes``: free ports, process groups, CPU seconds from /proc;
- ``services``: docling-mcp (:class:`DoclingServer`), the fake server (:class:`FakeServer`), a
  scratch database, a claimed Redis database (:func:`claim_redis_db`);
- ``docling_rs``: docling-rs-mcp over HTTP (:class:`RsServer`), or its stdio command;
- ``workers``: ``doclane worker`` started and stopped as a bench runs it, its environment, and
  the two waits on its jobs (:func:`wait_finished`: all ended; :func:`wait_succeeded`: all
  succeeded, a failure ends the bench);
- ``corpora``: documents to convert (a subset of bench/corpus.py's corpus, or written here);
- ``conversions``: direct calls and pipeline runs over the same documents, compared;
- ``docling_serve``: docling-serve beside them (the topology bench);
- ``figures``: percentiles, and the ``--json`` report.

A new bench (another server, a soak) adds a module of its own under bench/ and takes from here;
what a second bench would need of it moves here, not into an import of the first.
"""

from bench.harness.corpora import choose_files, stage_corpus, write_documents
from bench.harness.docling_rs import RsServer
from bench.harness.figures import percentile, print_json
from bench.harness.paths import DOCLANE, DOCLING_MCP_BIN, ROOT, TOOLS, commit_of
from bench.harness.processes import (
    free_port,
    port_open,
    process_cpu_s,
    process_tree_cpu_s,
    stop_group,
)
from bench.harness.services import (
    ADMIN_DB_URL,
    Broker,
    DoclingServer,
    FakeServer,
    claim_redis_db,
    scratch_database,
)
from bench.harness.workers import (
    start_worker,
    stop_worker,
    wait_finished,
    wait_succeeded,
    worker_env,
)

__all__ = [
    "ADMIN_DB_URL",
    "DOCLANE",
    "DOCLING_MCP_BIN",
    "ROOT",
    "TOOLS",
    "Broker",
    "DoclingServer",
    "FakeServer",
    "RsServer",
    "choose_files",
    "claim_redis_db",
    "commit_of",
    "free_port",
    "percentile",
    "port_open",
    "print_json",
    "process_cpu_s",
    "process_tree_cpu_s",
    "scratch_database",
    "stage_corpus",
    "start_worker",
    "stop_group",
    "stop_worker",
    "wait_finished",
    "wait_succeeded",
    "worker_env",
    "write_documents",
]
