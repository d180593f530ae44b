"""bench/topologies.py still works: its smoke size, through every kind of mode it has.

Not a measurement (CI machines differ and the figures of a dozen documents mean nothing): the
bench must run end to end, convert every document in every mode, and find the markdown of
doclane's pipeline identical to direct calls' and, over docling-serve, to docling-serve's own.
docling-serve is large (2.9 GB) and installed by scripts/test and by the bench itself
(scripts/lib.sh's ``ensure_docling_serve``), not by scripts/demo; under a bare pytest without
it this test is skipped, saying so, but CI never skips it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.benches import run_bench
from tests.support.tools import DOCLING_MCP_BIN, DOCLING_SERVE_BINARY

pytestmark = [
    pytest.mark.docling,
    pytest.mark.skipif(
        not DOCLING_SERVE_BINARY.exists(),
        reason=f"docling-serve is not installed ({DOCLING_SERVE_BINARY}): "
        "source scripts/lib.sh && ensure_docling_serve (or run python -m bench.topologies once)",
    ),
    pytest.mark.skipif(
        not Path(DOCLING_MCP_BIN).exists(),
        reason="docling-mcp is not installed: source scripts/lib.sh && ensure_docling_mcp",
    ),
]


@pytest.mark.timeout(900)
def test_topologies_smoke() -> None:
    report = run_bench("topologies", "--smoke", "--no-install", timeout=880)
    documents = report["documents"]
    assert documents >= 6  # two of each format the corpus has, less what submit refuses
    modes = {row["mode"]: row for row in report["modes"]}
    assert set(modes) == {"direct", "e-serve", "a-http-c1-on64", "d-remote-c2-on64"}
    for name, row in modes.items():
        assert row["succeeded"] == documents, (name, row["failures"])
        assert row["not_finished"] == {}, name
        assert row["docs_per_s"] > 0, name
    for name in ("a-http-c1-on64", "d-remote-c2-on64"):
        row = modes[name]
        assert row["md_same_as_direct_min"] == documents, row["md_differs_from_direct"]
        assert row["batch_calls"] >= 1, name  # batches on: the directory tool was used
    # docling-mcp over docling-serve gives docling-serve's own markdown, document for document.
    assert modes["d-remote-c2-on64"]["md_same_as_serve_min"] == documents
    assert modes["e-serve"]["md_same_as_direct_min"] == documents
