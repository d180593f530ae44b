"""bench/topologies.py's docling-rs-mcp rows still work: direct clients, HTTP and stdio.

Not a measurement (a dozen documents): every mode converts every document, and the pipeline's
markdown equals the direct call's, document for document.
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
