"""bench/investigations/http_call_latency.py still runs: every row makes its calls over its wire.

Not a measurement (a few calls); the figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import pytest

from tests.fixtures.benches import run_bench

pytestmark = pytest.mark.docling


@pytest.mark.timeout(300)
def test_http_call_latency_smoke() -> None:
    report = run_bench(
        "investigations.http_call_latency", "--calls", "5", "--rounds", "1", timeout=280
    )
    rows = {row["mode"]: row for row in report["rows"]}
    assert set(rows) == {"http", "http-delayed-ack", "stdio"}
    for name, row in rows.items():
        assert row["calls"] == 5, name
        assert row["p50_ms"] > 0, name
