"""bench/topologies.py's docling-rs-mcp rows still work: direct clients, HTTP and stdio.

Not a measurement (a dozen documents): every mode converts every document, the pipeline's
markdown equals the direct call's, document for document, and each says where its CPU went
(the floor part by part): the server's part in every mode, the clients' in the direct ones, the
pool's, PostgreSQL's and the submitter's in the pipeline's.
"""

from __future__ import annotations

import pytest

from tests.fixtures.benches import run_bench

pytestmark = pytest.mark.docling

RS_MODES = ("rs-direct", "rs-direct-x2", "rs-http-c2", "rs-stdio-c2")


@pytest.mark.timeout(600)
def test_topologies_rs_smoke() -> None:
    report = run_bench("topologies", "--smoke", "--modes", ",".join(RS_MODES), timeout=580)
    documents = report["documents"]
    assert documents >= 6
    modes = {row["mode"]: row for row in report["modes"]}
    assert set(modes) == set(RS_MODES)
    for name, row in modes.items():
        assert row["succeeded"] == documents, (name, row["failures"])
        assert row["not_finished"] == {}, name
        if name != "rs-direct":
            assert row["md_same_as_rs_direct_min"] == documents, row["md_differs_from_rs_direct"]
        (cpu,) = row["cpu_ms_per_doc_rounds"]
        spent = {part for part, ms in cpu.items() if ms > 0 and part != "all"}
        if name.startswith("rs-direct"):
            assert {"server", "reaped"} <= spent and cpu["pool"] == cpu["main"] == 0, (name, cpu)
        else:
            assert {"server", "pool", "reaped", "postgres"} <= spent, (name, cpu)
