"""Settings of the job processor: leases, job-level retry pacing, and who this worker is."""

from __future__ import annotations

import os
import socket

from pydantic import Field

from pipeline.support.settings import Section


class ProcessingSettings(Section):
    """How one worker process runs jobs.

    The lease is short and renewed while the job runs (every third of it), so a worker killed
    mid-conversion frees its job one lease later, whatever the document's size tier. Job-level
    retries (a whole new attempt, after the in-unit retries gave up) back off exponentially
    from ``job_retry_base_s`` up to ``job_retry_max_s``, with jitter so a fleet does not come
    back in step.
    """

    #: Who holds a lease (host:pid by default); shows in ``doclane status`` and the trail.
    worker_id: str | None = None
    lease_s: float = Field(default=60.0, gt=0)
    #: How often a running attempt renews its lease, which is also how soon it notices that
    #: its job was cancelled (and stops its MCP call); never less often than a third of the
    #: lease.
    cancel_check_s: float = Field(default=5.0, gt=0)
    job_retry_base_s: float = Field(default=10.0, gt=0)
    job_retry_max_s: float = Field(default=600.0, gt=0)
    #: When the breaker gives no ``retry_after``: how long an E309 job waits.
    circuit_retry_s: float = Field(default=30.0, gt=0)
    #: How long to wait before trying again when the database is unreachable (E401).
    db_retry_s: float = Field(default=15.0, gt=0)

    #: A running attempt's stage (converting, exporting) is written once the attempt is this
    #: old; a document converted sooner records its server with its results and no stage
    #: write at all (two statements of a job's four, for a fast server). 0 writes every stage
    #: at once.
    progress_hold_s: float = Field(default=0.5, ge=0)

    @property
    def lease_check_interval_s(self) -> float:
        return min(self.cancel_check_s, self.lease_s / 3.0)

    #: Small file jobs converted in one call of the server's directory tool: at most this many
    #: documents (1 turns batching off). A default docling-mcp caches 10 documents, and a batch
    #: must stay in the cache until it is exported: raise DOCLING_MCP_CACHE_MAX_DOCUMENTS on the
    #: server before raising this.
    batch_max_docs: int = Field(default=8, ge=1)
    #: The largest total size of the documents of one batch.
    batch_max_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    #: The batch call's deadline: the size tier of its total bytes, plus this per document.
    batch_per_doc_s: float = Field(default=5.0, ge=0)
    #: A CSV or XLSX file larger than this is converted alone, never in a batch: a batch's keys
    #: are proven by saving each document's Docling JSON, which for a table is 100-1000 times
    #: the file (a 65 kB XLSX: 12 MB, 1.2 s), more than the call the batch would save it
    #: (0.3 s). Measured on the real-world corpus: every table up to 39 kB saved in 0.05 s or
    #: less, every one from 64 kB in 1.2 s or more (docs/benchmarks.md,
    #: bench/investigations/proof_cost.py).
    batch_max_table_bytes: int = Field(default=48 * 1024, ge=0)

    #: Small jobs go in rounds: a drain's claim takes up to this many small, never-tried
    #: file jobs in all (its lead included) that can share a round
    #: (same queue, profile, options and formats); the process converts them concurrently,
    #: stores their results in groups, one transaction each, and claims more as room frees.
    #: A round never holds more than this many jobs at once (1 turns rounds off), and there is
    #: none where the servers run one conversion at a time (``DOCLANE_SERVER_CONCURRENCY``,
    #: below, fitted or set, is 1): one at a time a round gains nothing. Where the server
    #: offers docling-mcp's directory tool and a cache folder is shared, a batch is tried
    #: first (``DOCLANE_BATCH_MAX_DOCS``).
    round_max_docs: int = Field(default=8, ge=1)
    #: A drain's time budget: how long it keeps claiming (and a round keeps growing) before it
    #: finishes what it holds, rings its queue again and lets the process take its next bell
    #: (other queues, priorities and a warm shutdown wait for that). 0: one claim a bell.
    round_max_s: float = Field(default=2.0, ge=0)
    #: How many conversions of a round one worker process has in flight at once. Unset: what
    #: its servers really run at once, summed over a pool, each server asked once: docling-mcp
    #: 1 (in local mode it builds a converter per call and converts under one interpreter
    #: lock: a round of docling's 103 test documents two at a time was 0.72x the direct
    #: calls, one at a time 1.01x, the calls contending; on a machine loaded by other work two
    #: at once take a bigger share of it, 1.48x against 0.94x), docling-rs-mcp its ``--concurrency``
    #: (read from a stdio child's command, else its default, 2: rounds over it unchanged),
    #: another server 1. docs/benchmarks.md, *Rounds fitted to the server*, has the runs. Set
    #: it for what no server says: docling-rs-mcp over HTTP started with another
    #: ``--concurrency``, docling-mcp over docling-serve's engines.
    server_concurrency: int | None = Field(default=None, ge=1)

    def resolved_worker_id(self) -> str:
        return self.worker_id or f"{socket.gethostname()}:{os.getpid()}"
