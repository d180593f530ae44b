"""Is the fair claim O(1) at a million queued jobs? ``claim_queue`` under EXPLAIN ANALYZE.

Loads ``--jobs`` queued jobs (default 1,000,000) spread over ``--tenants`` tenants (default
1,000) in one queue, a tenth of the tenants with a running cap of 2 and already at it (two
running jobs each: their lanes are passed over, and each costs a look), and a tenth paused
(never read). Then measures, best of ``--runs``, each in a transaction rolled back:

- a lone claim (a drain's ``claim_queue`` with a round limit of 1);
- a round's claim (``claim_queue`` with a limit of 16: the lead and 15 companions by rotation).

    .venv/bin/python -m bench.fair_claim [--jobs 1000000] [--tenants 1000] [--json] [--keep]

The scratch database (``doclane_bench_fair_<pid>``) is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import psycopg

from bench.harness.store import bench_arguments, explain, in_scratch_database
from pipeline.queues import SMALL_BELOW_BYTES
from pipeline.settings.tree import read_settings
from pipeline.store.database import apply_migrations
from pipeline.store.queries import query

QUEUE = "doclane.small"

LOAD_TENANTS = """
INSERT INTO tenants (name, weight, max_running)
SELECT 't' || n, 1 + n %% 3,
       CASE WHEN n %% 10 = 1 THEN 2 WHEN n %% 10 = 2 THEN 0 END
FROM generate_series(1, %(tenants)s) n
"""

LOAD_JOBS = """
INSERT INTO jobs (id, source_kind, source_uri, size_bytes, profile, options, formats, queue,
                  priority, tenant, created_at)
SELECT gen_random_uuid(), 'file', '/inbox/' || n || '.pdf', 20000, 'auto', '{}', '{md}',
       %(queue)s, 0, 't' || (1 + n %% %(tenants)s),
       now() - interval '1 day' + n * interval '10 ms'
FROM generate_series(1, %(jobs)s) n
"""

# Two of each capped tenant's jobs running: the tenant is at its cap.
RUN_CAPPED = """
UPDATE jobs SET state = 'running', attempt = 1, attempts_spent = 1, lease_owner = 'bench',
                lease_expires_at = now() + interval '1 hour'
WHERE id IN (SELECT id FROM (
    SELECT j.id, row_number() OVER (PARTITION BY j.tenant ORDER BY j.created_at) AS k
    FROM jobs j JOIN tenants t ON t.name = j.tenant
    WHERE t.max_running = 2) x WHERE k <= 2)
"""


def load(url: str, args: argparse.Namespace) -> dict[str, Any]:
    apply_migrations(read_settings(store={"database_url": url}).store)
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.monotonic()
        conn.execute(LOAD_TENANTS, {"tenants": args.tenants})
        conn.execute(LOAD_JOBS, {"queue": QUEUE, "tenants": args.tenants, "jobs": args.jobs})
        conn.execute(RUN_CAPPED)
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("VACUUM ANALYZE tenant_lanes")
        conn.execute("VACUUM ANALYZE tenants")
        loaded_s = time.monotonic() - started
        row = conn.execute("SELECT id FROM jobs WHERE state = 'queued' LIMIT 1").fetchone()
        assert row is not None
        queued = conn.execute("SELECT sum(queued) FROM tenant_lanes").fetchone()
        params = {"queue": QUEUE, "worker": "bench", "lease_s": 60.0,
                  "small_below": SMALL_BELOW_BYTES}  # fmt: skip
        lone = explain(conn, query("claim_queue"), {**params, "limit": 1}, args.runs)
        round_ = explain(conn, query("claim_queue"), {**params, "limit": 16}, args.runs)
    return {
        "jobs": args.jobs,
        "tenants": args.tenants,
        "queued": int(queued[0]) if queued else 0,
        "load_s": round(loaded_s, 1),
        "lone_claim_ms": lone["execution_ms"],
        "round_claim_ms": round_["execution_ms"],
        # What each claim took (a function's plan counts the rows it returned): a claim that
        # found nothing would be fast and mean nothing.
        "lone_claim_rows": lone["rows"],
        "round_claim_rows": round_["rows"],
    }


def main() -> None:
    parser = bench_arguments(__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1_000)
    args = parser.parse_args()
    figures = in_scratch_database(args, "doclane_bench_fair", load)
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"{figures['queued']:,} queued jobs over {figures['tenants']:,} tenants "
        f"(loaded in {figures['load_s']} s)"
    )
    print(f"  a message's claim, alone:      {figures['lone_claim_ms']:.3f} ms")
    print(f"  a message's claim, round of 16: {figures['round_claim_ms']:.3f} ms")


if __name__ == "__main__":
    main()
